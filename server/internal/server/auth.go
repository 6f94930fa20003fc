package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Roles a principal may have (docs/deployment.md, "Authorization").
const (
	RoleAdmin   = "admin"   // every request: membership, leader transfer, snapshots, status, tickets on every key
	RoleClient  = "client"  // tickets (acquire, release, describe) on keys under its key_prefixes
	RoleMonitor = "monitor" // the status admin request only
)

// Names of the principals that are not configured by name. They are
// reserved: a configured principal may not use them.
const (
	// LegacyPrincipal is everyone presenting one of client_tokens.
	LegacyPrincipal = "client_tokens"
	// AnonymousPrincipal is everyone, when neither client_tokens nor
	// principals are configured.
	AnonymousPrincipal = "anonymous"
)

// AuthConfig configures principals: who may do what.
type AuthConfig struct {
	// CertIdentity selects which part of a verified client certificate
	// (mTLS) names a principal: "cn" (subject common name, the default),
	// "uri" or "dns" (any URI or DNS subject alternative name).
	CertIdentity string `toml:"cert_identity"`
	// Principals are the named identities with their role and keys.
	Principals []PrincipalConfig `toml:"principals"`
}

// PrincipalConfig is one principal of the configuration.
type PrincipalConfig struct {
	Name string `toml:"name"`
	Role string `toml:"role"` // admin, client or monitor
	// KeyPrefixes (client role only, required) are the key prefixes it may
	// use; "" allows every key.
	KeyPrefixes []string `toml:"key_prefixes"`
	// TokenSHA256 are the hex SHA-256 digests of its hello tokens
	// (ticketd hash-token prints one). Several allow a rotation.
	TokenSHA256 []string `toml:"token_sha256"`
	// Certificates are the client-certificate identities (see
	// AuthConfig.CertIdentity) that authenticate as this principal.
	Certificates []string `toml:"certificates"`
	// Quota limits what it may use (quota.go); zero values: no quota.
	Quota Quota `toml:"quota"`
}

// HashToken returns the hex SHA-256 of a token, the form token_sha256 takes.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// validate appends every problem of the auth settings to bad.
func (a *AuthConfig) validate(c *Config, bad func(string, ...any)) {
	switch a.CertIdentity {
	case "", "cn", "uri", "dns":
	default:
		bad("auth.cert_identity %q: want cn, uri or dns", a.CertIdentity)
	}
	names := map[string]bool{}
	hashes := map[string]string{}
	certs := map[string]string{}
	for _, t := range c.ClientTokens {
		hashes[HashToken(t)] = LegacyPrincipal
	}
	for i, p := range a.Principals {
		where := fmt.Sprintf("auth.principals[%d]", i)
		switch {
		case p.Name == "":
			bad("%s: name is empty: every principal needs a name (it appears in the audit log)", where)
		case p.Name == LegacyPrincipal || p.Name == AnonymousPrincipal:
			bad("%s: the name %q is reserved; choose another", where, p.Name)
		case len(p.Name) > 128 || !utf8.ValidString(p.Name) || strings.IndexFunc(p.Name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
			bad("%s: name %q must be 1..128 bytes of printable UTF-8", where, p.Name)
		case names[p.Name]:
			bad("%s: name %q is used twice", where, p.Name)
		}
		names[p.Name] = true
		if p.Name != "" {
			where = fmt.Sprintf("principal %q", p.Name)
		}
		switch p.Role {
		case RoleClient:
			if len(p.KeyPrefixes) == 0 {
				bad(`%s: a client needs key_prefixes (for example ["orders/"]; [""] allows every key)`, where)
			}
			for _, k := range p.KeyPrefixes {
				if len(k) > wire.MaxKey {
					bad("%s: key prefix of %d bytes is longer than a key (at most %d)", where, len(k), wire.MaxKey)
				}
			}
		case RoleAdmin, RoleMonitor:
			if len(p.KeyPrefixes) > 0 {
				bad("%s: key_prefixes apply to the client role only (an admin may use every key, a monitor none)", where)
			}
		default:
			bad("%s: role %q: want admin, client or monitor", where, p.Role)
		}
		if len(p.TokenSHA256) == 0 && len(p.Certificates) == 0 {
			bad("%s: give token_sha256 (from ticketd hash-token) or certificates, or it can never connect", where)
		}
		for _, h := range p.TokenSHA256 {
			h = strings.ToLower(h)
			if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
				bad("%s: token_sha256 entry is not 64 hex digits: store the output of ticketd hash-token, never the token", where)
				continue
			}
			if other, dup := hashes[h]; dup {
				bad("%s: a token of it is also a token of %q: every token names one principal", where, other)
			}
			hashes[h] = p.Name
		}
		for _, id := range p.Certificates {
			if id == "" {
				bad("%s: an empty certificate identity", where)
				continue
			}
			if other, dup := certs[id]; dup {
				bad("%s: certificate identity %q also names %q", where, id, other)
			}
			certs[id] = p.Name
		}
		p.Quota.validate(where, bad)
		if len(p.Certificates) > 0 && c.TLS.CAFile == "" {
			bad("%s: certificates need mutual TLS: set tls.ca (--tls-client-ca) so that clients present verified certificates", where)
		}
	}
}

// principal is one identity at run time with what it may do.
type principal struct {
	name     string // in the audit log and metrics; the key of authTable.byName
	role     string
	prefixes []string
	quota    Quota
	// hold is the name recorded in the holds it acquires; empty while no
	// principals are configured, so that such a cluster writes the same log
	// entries as before and every release stays unrestricted.
	hold string
}

// releaseAs is the principal a release is restricted to: none for an admin.
func (p *principal) releaseAs() string {
	if p.role == RoleAdmin {
		return ""
	}
	return p.hold
}

// principalFor is the principal a request carries into the log: the holder
// name for an acquire, the release restriction for a release (L or U).
func (p *principal) principalFor(t wire.Type) string {
	if t == wire.TypeAcquire {
		return p.hold
	}
	return p.releaseAs()
}

// keyAllowed: an admin may use every key; a client the keys under its prefixes.
func (p *principal) keyAllowed(key []byte) bool {
	switch p.role {
	case RoleAdmin:
		return true
	case RoleClient:
		for _, pre := range p.prefixes {
			if strings.HasPrefix(string(key), pre) {
				return true
			}
		}
	}
	return false
}

// authTable is the authentication and authorization state built from one
// configuration; a reload swaps the whole table.
type authTable struct {
	open         bool     // nothing configured: everyone is the anonymous admin
	legacy       [][]byte // client_tokens
	hashes       [][sha256.Size]byte
	hashOwner    []*principal
	certs        map[string]*principal
	certIdentity string
	byName       map[string]*principal
	// creds maps every credential that authenticates (credential names,
	// see authenticate) to its principal's name: a reload ends the
	// connections whose credential no longer names the same principal.
	creds map[string]string
}

// Credential names: what a connection authenticated with, without the secret.
const credOpen = "open" // nothing configured: everyone is anonymous

func credToken(sum [sha256.Size]byte) string { return "token:" + hex.EncodeToString(sum[:]) }
func credLegacy(token []byte) string {
	sum := sha256.Sum256(token)
	return "client_token:" + hex.EncodeToString(sum[:])
}
func credCert(mode, id string) string { return "certificate:" + mode + ":" + id }

// credKind is the kind of a credential name, for the audit log.
func credKind(cred string) string {
	kind, _, _ := strings.Cut(cred, ":")
	return kind
}

// newAuthTable builds the table from a configuration that passed Validate.
func newAuthTable(c *Config) *authTable {
	t := &authTable{certs: map[string]*principal{}, byName: map[string]*principal{}, certIdentity: c.Auth.CertIdentity, creds: map[string]string{}}
	if t.certIdentity == "" {
		t.certIdentity = "cn"
	}
	if len(c.ClientTokens) == 0 && len(c.Auth.Principals) == 0 {
		t.open = true
		t.byName[AnonymousPrincipal] = &principal{name: AnonymousPrincipal, role: RoleAdmin}
		t.creds[credOpen] = AnonymousPrincipal
		return t
	}
	if len(c.ClientTokens) > 0 {
		// client_tokens keep working: "client on every key". With no
		// principals configured they also keep the admin rights they always
		// had, so that no deployment breaks; define an admin principal to
		// separate operators from applications.
		p := &principal{name: LegacyPrincipal, role: RoleClient, prefixes: []string{""}, hold: LegacyPrincipal}
		if len(c.Auth.Principals) == 0 {
			p.role, p.hold = RoleAdmin, ""
		}
		t.byName[p.name] = p
		for _, tok := range c.ClientTokens {
			t.legacy = append(t.legacy, []byte(tok))
			t.creds[credLegacy([]byte(tok))] = LegacyPrincipal
		}
	}
	for _, pc := range c.Auth.Principals {
		p := &principal{name: pc.Name, role: pc.Role, prefixes: pc.KeyPrefixes, hold: pc.Name, quota: pc.Quota}
		t.byName[p.name] = p
		for _, h := range pc.TokenSHA256 {
			var sum [sha256.Size]byte
			_, _ = hex.Decode(sum[:], []byte(strings.ToLower(h))) // validated as 64 hex digits when the configuration loaded
			t.hashes = append(t.hashes, sum)
			t.hashOwner = append(t.hashOwner, p)
			t.creds[credToken(sum)] = p.name
		}
		for _, id := range pc.Certificates {
			t.certs[id] = p
			t.creds[credCert(t.certIdentity, id)] = p.name
		}
	}
	return t
}

// authenticate maps a hello to a principal: the token when one is given,
// else the verified client certificate. Tokens are compared in constant time
// against every configured one (no early exit), so timing reveals neither
// which token matched nor how much of one. It returns the principal and the
// credential's name (never the secret itself), or nil and why.
func (t *authTable) authenticate(token []byte, nc net.Conn) (p *principal, cred, why string) {
	if t.open {
		return t.byName[AnonymousPrincipal], credOpen, ""
	}
	if len(token) > 0 {
		var found *principal
		sum := sha256.Sum256(token)
		for i := range t.hashes {
			if subtle.ConstantTimeCompare(sum[:], t.hashes[i][:]) == 1 {
				found = t.hashOwner[i]
			}
		}
		cred = credToken(sum)
		legacy := 0
		for _, l := range t.legacy {
			legacy |= subtle.ConstantTimeCompare(token, l)
		}
		if legacy == 1 {
			found, cred = t.byName[LegacyPrincipal], credLegacy(token)
		}
		if found == nil {
			return nil, "", errBadToken
		}
		return found, cred, ""
	}
	if tc, ok := nc.(*tls.Conn); ok {
		if st := tc.ConnectionState(); len(st.VerifiedChains) > 0 && len(st.PeerCertificates) > 0 {
			cert := st.PeerCertificates[0]
			var ids []string
			switch t.certIdentity {
			case "cn":
				ids = []string{cert.Subject.CommonName}
			case "dns":
				ids = cert.DNSNames
			case "uri":
				for _, u := range cert.URIs {
					ids = append(ids, u.String())
				}
			}
			for _, id := range ids {
				if p := t.certs[id]; p != nil {
					return p, credCert(t.certIdentity, id), ""
				}
			}
			return nil, "", fmt.Sprintf("no principal has the client certificate's identity (%s %q) and the hello has no token; list it under a principal's certificates", t.certIdentity, strings.Join(ids, ","))
		}
	}
	return nil, "", errBadToken
}

// errBadToken is the one refusal text for every wrong or missing token, so
// that nothing tells a near miss from a wild guess.
const errBadToken = "the client token is missing or not accepted by this server; check the client's token against the server's client_tokens or principals"

// SetAuth replaces the authentication settings (client_tokens and auth) of
// a running server, as ticketd does on SIGHUP. New hellos use them at once.
// An open connection whose credential (token or certificate identity) no
// longer names the principal it authenticated as is ended with E 5 and
// audited; the others keep their principal, by name, with the rights it has
// in the new settings.
func (s *Server) SetAuth(clientTokens []string, auth AuthConfig) error {
	c := s.cfg
	c.ClientTokens, c.Auth = clientTokens, auth
	var errs []string
	auth.validate(&c, func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) })
	for i, t := range clientTokens {
		if t == "" || len(t) > wire.MaxToken {
			errs = append(errs, fmt.Sprintf("client_tokens[%d] must be 1..1024 bytes", i))
		}
	}
	if len(errs) > 0 {
		s.metrics.authReloads.WithLabelValues("failed").Inc()
		return fmt.Errorf("auth settings not changed: %s", strings.Join(errs, "; "))
	}
	t := newAuthTable(&c)
	s.auth.Store(t)
	s.metrics.authReloads.WithLabelValues("ok").Inc()
	s.log.Info("auth settings reloaded", "principals", len(auth.Principals), "client_tokens", len(clientTokens))
	s.endRevoked(t)
	return nil
}

// AuthReloadFailed records a reload whose configuration did not load (ticketd
// calls it on SIGHUP); the settings in force stay.
func (s *Server) AuthReloadFailed() { s.metrics.authReloads.WithLabelValues("failed").Inc() }

// errRevoked is the E 5 text for a connection whose credential a reload removed.
const errRevoked = "the credential this connection authenticated with (token or client certificate) was revoked by a configuration reload; reconnect with a current one"

// endRevoked ends every authenticated connection whose credential no longer
// names its principal in t. t is already in force: a hello authenticating
// concurrently checks its credential against the table in force after it
// records it (conn.hello), so no connection escapes both checks.
func (s *Server) endRevoked(t *authTable) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		cred, name := c.cred, c.principal
		c.mu.Unlock()
		if cred == "" || t.creds[cred] == name {
			continue
		}
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "audit", slog.String("principal", name), slog.String("op", "session"),
			slog.String("outcome", "revoked"), slog.String("credential", credKind(cred)), slog.String("remote", c.nc.RemoteAddr().String()))
		c.fatalErr(wire.CodeUnauthenticated, errRevoked)
	}
}

// lookup returns the connection's principal in the current table, nil when
// a reload removed it.
func (c *conn) lookup() *principal { return c.srv.auth.Load().byName[c.principal] }

// opName names a request type in audit records and metrics.
func opName(t wire.Type) string {
	switch t {
	case wire.TypeAcquire:
		return "acquire"
	case wire.TypeRelease:
		return "release"
	case wire.TypeDescribe:
		return "describe"
	case wire.TypeAdmin:
		return "admin"
	case wire.TypeReleaseOwner:
		return "release_owner"
	}
	return t.String()
}

func forbiddenName(reason uint8) string {
	switch reason {
	case wire.ForbiddenRole:
		return "role"
	case wire.ForbiddenKey:
		return "key"
	case wire.ForbiddenOwner:
		return "owner"
	}
	return "unknown"
}

// authorize checks a ticket request (registered with begin) against the
// connection's principal. On refusal it answers F, audits and counts it, and
// reports false. The key is checked before anything is looked up, so the
// refusal is the same whether the key exists or not.
func (c *conn) authorize(f *wire.Frame) (*principal, bool) {
	p := c.lookup()
	var reason uint8
	switch {
	case p == nil || p.role == RoleMonitor:
		reason = wire.ForbiddenRole
	case !p.keyAllowed(f.Key):
		reason = wire.ForbiddenKey
	default:
		return p, true
	}
	c.refuse(f.ID, opName(f.Type), string(f.Key), reason)
	return nil, false
}

// refuse answers a request F and records the refusal: the metric always,
// the audit log within its rate limit. op is a name from a closed set
// (opName, "coordination", "admin <op>" of a known op or "admin other").
func (c *conn) refuse(id uint32, op, key string, reason uint8, extra ...slog.Attr) {
	s := c.srv
	s.metrics.authzRefusals.WithLabelValues(op, forbiddenName(reason)).Inc()
	if s.logLimit.allow(logKey{what: op, who: c.principal, reason: forbiddenName(reason)}) {
		attrs := []slog.Attr{slog.String("principal", c.principal), slog.String("op", op), slog.String("outcome", "denied"),
			slog.String("reason", forbiddenName(reason)), slog.String("remote", c.nc.RemoteAddr().String())}
		if key != "" {
			attrs = append(attrs, slog.String("key", auditText(key)))
		}
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "audit", append(attrs, extra...)...)
	}
	c.finish(id, &wire.Frame{Type: wire.TypeForbidden, ID: id, Reason: reason})
}
