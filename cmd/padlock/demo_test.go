package main

import (
	"context"
	"testing"
	"time"
)

// The demo is README command #1: it must run on an embedded etcd with
// nothing installed, and against any URL. runDemo fails if it finds an
// overlap or a stale fencing token, or acquires nothing.
func TestDemoEmbeddedEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := runDemo(ctx, []string{"--duration", "2s"}); err != nil {
		t.Fatal(err)
	}
}

func TestDemoURL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := runDemo(ctx, []string{"--url", "mem://demo-test", "--duration", "1s", "--clients", "3"}); err != nil {
		t.Fatal(err)
	}
}
