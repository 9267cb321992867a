package supervisor

import "syscall"

// procChildren maps each live process to its live children, from the
// parent links in /proc (which do not need CONFIG_PROC_CHILDREN).
func procChildren() map[int][]int {
	children := map[int][]int{}
	for _, pid := range procPids() {
		state, ppid, ok := procStat(pid)
		if !ok || state == 'Z' || state == 'X' {
			continue // gone meanwhile, or dead
		}
		children[ppid] = append(children[ppid], pid)
	}
	return children
}

// below lists root and the processes below it in children.
func below(children map[int][]int, root int) []int {
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// procPids lists the pids in /proc.
func procPids() []int {
	fd, err := syscall.Open("/proc", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	var pids []int
	buf := make([]byte, 16<<10)
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return pids
		}
		_, _, names := syscall.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			if pid, ok := atoi(name); ok {
				pids = append(pids, pid)
			}
		}
	}
}

// procStat reads a process's state and parent from /proc/PID/stat:
// "pid (comm) state ppid ...", where comm may hold spaces and parentheses.
func procStat(pid int) (state byte, ppid int, ok bool) {
	fd, err := syscall.Open("/proc/"+itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	defer syscall.Close(fd)
	var buf [1024]byte
	n, _ := readFull(fd, buf[:])
	st := buf[:n]
	i := len(st) - 1
	for i >= 0 && st[i] != ')' {
		i--
	}
	// ") S 123 ..."
	if i < 0 || len(st) < i+5 || st[i+1] != ' ' || st[i+3] != ' ' {
		return 0, 0, false
	}
	rest := st[i+4:]
	j := 0
	for j < len(rest) && rest[j] != ' ' {
		j++
	}
	ppid, ok = atoi(string(rest[:j]))
	return st[i+2], ppid, ok
}

// readFull reads len(b) bytes from fd unless it ends first.
func readFull(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := syscall.Read(fd, b[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			return n, err
		}
		n += m
	}
	return n, nil
}

// say writes one line of the supervisor's own to fd: a backend's stderr,
// which mcp-mux logs as the backend's, or the supervisor's (mcp-mux's).
func say(fd int, s string) { syscall.Write(fd, []byte("mcp-mux supervisor: "+s+"\n")) }

// oneLine is s with its line breaks made spaces: the report is one line.
func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// atoi parses a non-negative decimal int.
func atoi(s string) (int, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}
