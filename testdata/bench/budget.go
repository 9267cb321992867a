//go:build linux

package main

// What the go-sdk rows' 8-session target leaves a hop. With 8 sessions
// calling back to back, the client, the hop and the fixture keep the
// machine's cores busy: calls/s goes as one over the CPU a call costs all
// of them together, so a hop meets ×0.9 of direct only if the client's
// CPU per call, the fixture's below the hop and the hop's own add up to at
// most direct's (client and fixture) divided by 0.9. The table's own cells
// give each term; the line printed says what that leaves the hop in this
// run, what the ratios predicted from CPU were against the ones measured
// (which checks the model), and what the bridge, mcp-mux and the HTTP door
// alone (the bridge answering tools/call itself: -canned) cost.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// cannedDoor names the cell of the bridge answering tools/call itself (an
// era label of sdkKey, so that its keys are the bridge's sample's own).
const cannedDoor = "canned"

// budgetSessions is the cell the budget is for: the one with the target
// that CPU decides.
const budgetSessions = 8

// budgetTarget is that cell's target, ×direct.
const budgetTarget = 0.9

// gosdkCanned measures the bridge with -canned in budgetSessions' cell.
func (b *bench) gosdkCanned(ctx context.Context, s sample) (int, error) {
	addr, err := freeAddr()
	if err != nil {
		return 0, err
	}
	argv := append([]string{b.bridge, "-canned", addr, b.fixture}, httpFixture.argv()...)
	p, err := b.launchHTTP(ctx, bridge, fmt.Sprintf("gosdk-canned-%d", nextSeq()), argv, nil, addr)
	if err != nil {
		return 0, err
	}
	defer p.stop(5 * time.Second)
	return b.gosdkCell(ctx, p, bridge, cannedDoor, budgetSessions, s)
}

// printBudget is the line under the go-sdk table: see the top of the file.
func (b *bench) printBudget(w io.Writer) {
	n := budgetSessions
	get := func(m mode, key string) float64 {
		v, _ := b.median(m, key)
		return v
	}
	whole := get(direct, kSDKClientCPU("", n)) + get(direct, kSDKCPU("", n))
	directRate := get(direct, kSDKCalls("", n))
	if whole <= 0 || directRate <= 0 {
		return
	}
	var hops []string
	budget, haveBudget := 0.0, false
	for _, m := range []mode{bridge, muxed} {
		client, below, self := get(m, kSDKClientCPU("", n)), get(m, kSDKCPUBelow("", n)), get(m, kSDKCPU("", n))
		if client <= 0 || below <= 0 || self <= 0 {
			continue
		}
		if m == muxed {
			// mcp-mux's own terms, since it is mcp-mux the target is for.
			budget, haveBudget = whole/budgetTarget-client-below, true
		}
		hops = append(hops, fmt.Sprintf("%s %s (×%.2f predicted from CPU, ×%.2f measured)",
			m, dur(self), whole/(client+below+self), get(m, kSDKCalls("", n))/directRate))
	}
	if !haveBudget {
		return
	}
	left := fmt.Sprintf("the hop may cost at most %s per call", dur(budget))
	if budget <= 0 {
		left = "the two already cost more than that: no hop can meet it"
	}
	if v := get(bridge, kSDKCPU(cannedDoor, n)); v > 0 {
		hops = append(hops, fmt.Sprintf("the HTTP door alone (the bridge answering tools/call itself, `-canned`) %s", dur(v)))
	}
	fmt.Fprintf(w, "\nWhat the %d-session target leaves the hop, medians of the same rounds: direct's client and fixture cost %s per call together, "+
		"so ×%.1f allows %s for the client, the fixture below the hop and the hop; with mcp-mux's client and fixture as measured, "+
		"%s. CPU per call: %s.\n",
		n, dur(whole), budgetTarget, dur(whole/budgetTarget), left, strings.Join(hops, "; "))
}
