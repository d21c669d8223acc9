package server

// HoldListTurns takes every turn of the server's lists of Addons, as lists
// that are being read would, until release is called. The server's
// Handler must have been built.
func (s *Server) HoldListTurns() (release func()) {
	for range cap(s.lists) {
		s.lists <- struct{}{}
	}
	return func() {
		for range cap(s.lists) {
			<-s.lists
		}
	}
}
