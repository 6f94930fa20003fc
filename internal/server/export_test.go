package server

// Timers is the number of live wait and lease timers on the leader's core.
func Timers(s *Server) int64 { return s.core.timerGauge.Load() }
