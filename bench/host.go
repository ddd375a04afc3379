package bench

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Host describes the machine of a run.
type Host struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
	CPUs int    `json:"cpus"`
	Go   string `json:"go"`
	// Model is the CPU's model name (Linux: /proc/cpuinfo), empty where
	// unknown.
	Model string `json:"model,omitempty"`
	// LoadStart and LoadEnd are the one-minute load average when the run
	// started and when it finished (Linux: /proc/loadavg; -1 where
	// unknown): other work on a shared machine shows here.
	LoadStart float64 `json:"load_start"`
	LoadEnd   float64 `json:"load_end"`
}

// ThisHost describes the machine this process runs on, with its load now
// as LoadStart (LoadEnd is -1: set it when the run ends, from LoadAvg).
func ThisHost() Host {
	return Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version(),
		Model: cpuModel(), LoadStart: LoadAvg(), LoadEnd: -1}
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// LoadAvg is the one-minute load average of /proc/loadavg, or -1.
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return -1
	}
	return v
}
