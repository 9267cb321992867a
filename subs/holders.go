package subs

// The holders of one (backend, uri) key: a set of subscriptions by session,
// small and allocation-free for the common few, a map past that.

import "iter"

// smallHolders is how many holders a key keeps in a plain slice before
// switching to a map. Most keys have one or a few holders, and a Go map costs
// a couple of hundred bytes even for one element, which would dominate the
// per-subscription memory; a short slice is also faster to scan than to hash.
const smallHolders = 8

// holderSet is the sessions holding one key: a slice while small, a map
// (session -> Sub) once large so removal stays O(1) for popular resources.
// Exactly one of few and many is in use.
type holderSet struct {
	few  []*Sub
	many map[string]*Sub
}

func (h *holderSet) len() int {
	if h.many != nil {
		return len(h.many)
	}
	return len(h.few)
}

// add inserts s; the caller guarantees its session is not present yet.
func (h *holderSet) add(s *Sub) {
	if h.many != nil {
		h.many[s.Session] = s
		return
	}
	if len(h.few) < smallHolders {
		h.few = append(h.few, s)
		return
	}
	h.many = make(map[string]*Sub, 2*smallHolders)
	for _, o := range h.few {
		h.many[o.Session] = o
	}
	h.many[s.Session] = s
	h.few = nil
}

func (h *holderSet) remove(session string) {
	if h.many != nil {
		delete(h.many, session)
		return
	}
	for i, s := range h.few {
		if s.Session == session {
			// Order does not matter; swap-remove avoids shifting, and the
			// cleared slot lets the Sub be collected.
			last := len(h.few) - 1
			h.few[i] = h.few[last]
			h.few[last] = nil
			h.few = h.few[:last]
			if last == 0 {
				h.few = nil
			}
			return
		}
	}
}

// all iterates the holders without building a slice, since Subscribers
// calls it on every notification.
func (h *holderSet) all() iter.Seq[*Sub] {
	return func(yield func(*Sub) bool) {
		if h.many == nil {
			for _, s := range h.few {
				if !yield(s) {
					return
				}
			}
			return
		}
		for _, s := range h.many {
			if !yield(s) {
				return
			}
		}
	}
}
