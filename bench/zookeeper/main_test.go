// Package zookeeper_test holds the go test benchmarks of padlock's zookeeper
// backend; the servers they share start on first use (benchutil.Server).
package zookeeper_test

import (
	"testing"

	"github.com/padlock-go/padlock/bench/benchutil"
)

func TestMain(m *testing.M) { benchutil.Main(m) }
