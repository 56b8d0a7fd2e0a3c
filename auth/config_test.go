package auth

import (
	"strings"
	"testing"
)

// The environment's spelling of these settings is tested in package config.

func TestZeroLeewayMeansDefaultNegativeNone(t *testing.T) {
	if got := (Config{}).withDefaults().Leeway; got != DefaultLeeway {
		t.Errorf("zero leeway = %s, want the default %s", got, DefaultLeeway)
	}
	if got := (Config{Leeway: -1}).withDefaults().Leeway; got != 0 {
		t.Errorf("negative leeway = %s, want none", got)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	_, err := New(t.Context(), Config{JWKSURL: DevJWKSURL, Issuer: DevIssuer, Audience: "das", Algorithms: []string{"HS256"}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "HS256") {
		t.Fatalf("New with HS256 allowed: %v", err)
	}
}
