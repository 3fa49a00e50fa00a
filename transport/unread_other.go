//go:build !linux

package transport

// Unread reports that this system cannot tell how much of the child's stdin is unread
// (FIONREAD on a pipe's write end answers for the other direction on the BSDs).
func (p *Process) Unread() (n int, ok bool) { return 0, false }
