package main

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/server"
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
	})
}
