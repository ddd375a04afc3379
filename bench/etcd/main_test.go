// Package etcd_test holds the go test benchmarks of padlock's etcd
// backend; the servers they share start on first use (benchutil.Server).
package etcd_test

import (
	"testing"

	"github.com/padlock-go/padlock/bench/benchutil"
)

func TestMain(m *testing.M) { benchutil.Main(m) }
