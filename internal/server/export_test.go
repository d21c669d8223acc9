package server

// HoldListTurns takes every turn of the server's lists of Addons, as lists
// that are being read would, until release is called. The server's
// Handler must have been built.
func (s *Server) HoldListTurns() (release func()) {
	var held []func()
	for {
		r, ok, _ := s.lists.take("")
		if !ok {
			break
		}
		held = append(held, r)
	}
	return func() {
		for _, r := range held {
			r()
		}
	}
}
