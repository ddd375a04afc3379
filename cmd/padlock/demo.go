package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/all"
	"github.com/padlock-go/padlock/padlocktest"
	"github.com/padlock-go/padlock/padlocktest/etcdserver"
	"github.com/padlock-go/padlock/padlocktest/fenced"
)

func runDemo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	url := urlFlag(fs, "backend `URL` (default: $PADLOCK_URL, else an embedded etcd in a temp dir)")
	clients := fs.Int("clients", 4, "independent Lockers (clients)")
	workers := fs.Int("workers", 3, "workers per client")
	locks := fs.Int("locks", 3, "lock names to contend for")
	duration := fs.Duration("duration", 5*time.Second, "how long to run")
	work := fs.Duration("work", 2*time.Millisecond, "time spent inside each critical section")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("demo takes no arguments, got %q", fs.Args())}
	}
	if *clients < 1 || *workers < 1 || *locks < 1 || *duration <= 0 || *work < 0 {
		return usageError{fmt.Errorf("%w: demo: --clients, --workers, --locks and --duration must be positive, --work not negative", padlock.ErrInvalidOption)}
	}

	if *url == "" {
		addr, stop, err := embeddedEtcd(ctx)
		if err != nil {
			return err
		}
		defer stop()
		*url = "etcd://" + addr + "/padlock-demo"
	}
	lockers := make([]*padlock.Locker, *clients)
	for i := range lockers {
		l, err := padlock.Open(ctx, *url)
		if err != nil {
			return asUsage(err)
		}
		defer l.Close()
		lockers[i] = l
	}
	fmt.Printf("padlock demo: %d clients x %d workers contending for %d locks for %v\nbackend: %s\n",
		*clients, *workers, *locks, *duration, redacted(*url))
	fmt.Printf("capabilities: %+v\n\n", lockers[0].Capabilities())

	var (
		store    = fenced.NewStore()
		inside   = make([]atomic.Int32, *locks)
		overlaps atomic.Int64
		acquired atomic.Int64
		failures atomic.Int64
		firstErr atomic.Value // the first error, shown in the summary
		mu       sync.Mutex
		waits    = hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
		minTok   = ^uint64(0)
		maxTok   uint64
	)
	runCtx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	began := time.Now()
	var wg sync.WaitGroup
	for c := range *clients {
		for range *workers {
			wg.Go(func() {
				for runCtx.Err() == nil {
					i := rand.IntN(*locks)
					name := fmt.Sprintf("demo/account-%d", i)
					start := time.Now()
					lk, err := lockers[c].Lock(runCtx, name)
					if err != nil {
						if runCtx.Err() == nil {
							failures.Add(1)
							firstErr.CompareAndSwap(nil, err.Error())
						}
						continue
					}
					wait := time.Since(start)
					if inside[i].Add(1) > 1 {
						overlaps.Add(1)
					}
					store.Write(name, lk.Token(), 1)
					time.Sleep(*work)
					inside[i].Add(-1)
					if err := lk.Unlock(context.WithoutCancel(runCtx)); err != nil {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					acquired.Add(1)
					mu.Lock()
					waits.RecordValue(wait.Microseconds())
					minTok, maxTok = min(minTok, lk.Token()), max(maxTok, lk.Token())
					mu.Unlock()
				}
			})
		}
	}
	progress(runCtx, *duration, &acquired, &overlaps)
	wg.Wait()
	ran := time.Since(began) // shorter than --duration after Ctrl-C

	mu.Lock()
	defer mu.Unlock()
	n := acquired.Load()
	fmt.Printf("\nsummary\n")
	fmt.Printf("  ran               %v\n", ran.Round(10*time.Millisecond))
	fmt.Printf("  acquisitions      %d (%.0f/s)\n", n, float64(n)/ran.Seconds())
	fmt.Printf("  wait p50 / p99    %v / %v\n", us(waits.ValueAtQuantile(50)), us(waits.ValueAtQuantile(99)))
	if n > 0 {
		fmt.Printf("  token range       %d .. %d\n", minTok, maxTok)
	}
	fmt.Printf("  fenced writes     %d accepted, %d rejected as stale\n", store.Accepted(), store.Rejected())
	fmt.Printf("  errors            %d\n", failures.Load())
	if e, ok := firstErr.Load().(string); ok {
		fmt.Printf("  first error       %s\n", e)
	}
	fmt.Printf("  overlaps found    %d\n", overlaps.Load())
	if overlaps.Load() > 0 || store.Rejected() > 0 {
		return fmt.Errorf("mutual exclusion violated: %d overlaps, %d stale writes", overlaps.Load(), store.Rejected())
	}
	if n == 0 {
		return errors.New("no lock was acquired")
	}
	return nil
}

func us(v int64) time.Duration {
	return (time.Duration(v) * time.Microsecond).Round(10 * time.Microsecond)
}

// progress prints the progress until ctx ends: one line rewritten in place
// on a terminal, a new line every second when the output is piped.
func progress(ctx context.Context, total time.Duration, acquired, overlaps *atomic.Int64) {
	tty := isTerminal(os.Stdout)
	every := time.Second
	if tty {
		every = 250 * time.Millisecond
	}
	start := time.Now()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if tty {
				fmt.Println()
			}
			return
		case <-t.C:
			line := fmt.Sprintf("  %5.1fs / %v   acquisitions %6d   overlaps %d",
				time.Since(start).Seconds(), total, acquired.Load(), overlaps.Load())
			if tty {
				fmt.Print("\r" + line + " ")
			} else {
				fmt.Println(line)
			}
		}
	}
}

// isTerminal reports whether f is a character device, such as a terminal.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// redacted hides a password in a URL for printing.
func redacted(raw string) string { return padlock.RedactURL(raw) }

// embeddedEtcd starts an in-process etcd on free loopback ports in a
// temporary directory, and returns its client address and a stop function.
func embeddedEtcd(ctx context.Context) (string, func(), error) {
	dir, err := os.MkdirTemp("", "padlock-demo-etcd-")
	if err != nil {
		return "", nil, err
	}
	cp, err := padlocktest.FreePort()
	if err != nil {
		return "", nil, err
	}
	pp, err := padlocktest.FreePort()
	if err != nil {
		return "", nil, err
	}
	fmt.Printf("starting embedded etcd v3.7 in %s ...\n", dir)
	e, err := etcdserver.Start(ctx, etcdserver.Config{
		Name: "demo", Dir: dir, LogLevel: "fatal",
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", cp),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", pp),
	})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return fmt.Sprintf("127.0.0.1:%d", cp), func() { e.Close(); os.RemoveAll(dir) }, nil
}
