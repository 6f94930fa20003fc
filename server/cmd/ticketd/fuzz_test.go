package main

import (
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/server"
)

// FuzzLoadConfigFile feeds arbitrary bytes as the config file: decoding
// either fails or yields a configuration that Validate accepts or rejects,
// never a panic. Seeds live in testdata/fuzz/FuzzLoadConfigFile.
func FuzzLoadConfigFile(f *testing.F) {
	f.Add([]byte(clusterFile))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := server.DefaultConfig()
		if err := decodeConfigFile(data, &cfg); err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			return
		}
		if cfg.NodeID == "" || cfg.AdvertiseClientAddr == "" || cfg.AdvertiseRaftAddr == "" || cfg.Logger == nil {
			t.Fatalf("Validate accepted an incomplete config: %+v", cfg)
		}
		for _, p := range cfg.Auth.Principals {
			for _, h := range p.TokenSHA256 {
				if len(h) != 64 {
					t.Fatalf("Validate accepted token_sha256 %q of principal %q", h, p.Name)
				}
			}
			if p.Name == "" || p.Role == server.RoleClient && len(p.KeyPrefixes) == 0 || len(p.TokenSHA256)+len(p.Certificates) == 0 {
				t.Fatalf("Validate accepted an unusable principal: %+v", p)
			}
		}
	})
}
