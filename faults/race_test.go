//go:build race

package faults

func init() { raceBuild = true }
