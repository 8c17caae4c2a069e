package proxy

import "crypto/subtle"

// adminIdentity names who presents token on the admin API: "admin" for
// the admin token. ok is false for any other token (and for every token
// when no admin token is configured).
func (s *Server) adminIdentity(token string) (who string, ok bool) {
	if s.cfg.AdminToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.AdminToken)) == 1 {
		return "admin", true
	}
	return "", false
}
