package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/padlock-go/padlock"
)

// runHolders prints the locks held under a name prefix, as a table or JSON,
// once or every --watch interval until interrupted.
func runHolders(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("holders", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	url := urlFlag(fs, "backend `URL` (default $PADLOCK_URL)")
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	watch := fs.Duration("watch", 0, "print again every interval (for example 1s) until interrupted")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: padlock holders [--url URL] [--json] [--watch D] [PREFIX]\n\nLists the holds under PREFIX (all by default): kind (writer, reader, permit k/n, leader), token, owner, host, pid, age, lease left, waiters (an election's candidates) and a leader's value.")
		fs.PrintDefaults()
	}
	prefix, err := parseOne(fs, args, false)
	if err != nil {
		return err
	}
	if *watch < 0 {
		return usageError{fmt.Errorf("%w: --watch %v is negative", padlock.ErrInvalidOption, *watch)}
	}
	l, err := openURL(ctx, *url)
	if err != nil {
		return err
	}
	defer l.Close()
	for {
		hs, err := l.Holders(ctx, prefix)
		if err != nil {
			return asUsage(err) // an invalid PREFIX
		}
		if *asJSON {
			if err := writeJSON(stdout, hs); err != nil {
				return err
			}
		} else if err := writeTable(stdout, hs, time.Now()); err != nil {
			return err
		}
		if *watch <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // interrupted: the normal way to stop watching
		case <-time.After(*watch):
		}
		if !*asJSON {
			fmt.Fprintln(stdout)
		}
	}
}

// runUnlock force-releases a lock, after confirmation unless --yes.
func runUnlock(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("unlock", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	url := urlFlag(fs, "backend `URL` (default $PADLOCK_URL)")
	force := fs.Bool("force", false, "required: take the lock away from its holder")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: padlock unlock --force [--yes] [--url URL] NAME

Takes NAME away from whoever holds it, for a stuck lock. The holder is not
stopped: it learns at its next renewal (within a third of its TTL) and may
act as the holder until then; only resources that check fencing tokens are
safe. Exit status 3 when nobody holds NAME.`)
		fs.PrintDefaults()
	}
	name, err := parseOne(fs, args, true)
	if err != nil {
		return err
	}
	if !*force {
		return usageError{errors.New("unlock takes a lock away from another process: say --force")}
	}
	l, err := openURL(ctx, *url)
	if err != nil {
		return err
	}
	defer l.Close()
	if !*yes {
		seen, listed, err := holdsOf(ctx, l, name)
		if err != nil {
			return err
		}
		who := "its holder"
		if len(seen) > 0 {
			var ds []string
			for _, h := range seen {
				ds = append(ds, describe(h))
			}
			who = strings.Join(ds, "; ")
		}
		fmt.Fprintf(stdout, "force-release %q from %s? [y/N] ", name, who)
		answer, _ := bufio.NewReader(stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return errors.New("not confirmed; nothing changed")
		}
		// The answer may come long after the question: the holds asked
		// about must be the ones released, not those of a holder that took
		// the name meanwhile (the stuck one's lease ran out, say).
		now, _, err := holdsOf(ctx, l, name)
		if err != nil {
			return err
		}
		if listed && !sameHolds(seen, now) {
			return fmt.Errorf("%q changed hands while you answered (%d holds now); nothing changed: run unlock again to see them", name, len(now))
		}
	}
	h, err := l.ForceUnlock(ctx, name)
	if errors.Is(err, padlock.ErrNotHeld) {
		return exitError{3, err}
	}
	if err != nil {
		return asUsage(err)
	}
	fmt.Fprintf(stdout, "padlock: released %q from %s\n", name, describe(h))
	return nil
}

// holdsOf lists name's holds; listed is false where the backend cannot
// list them (ErrUnsupported).
func holdsOf(ctx context.Context, l *padlock.Locker, name string) (hs []padlock.Holder, listed bool, err error) {
	all, err := l.Holders(ctx, name)
	if errors.Is(err, padlock.ErrUnsupported) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, asUsage(err) // an invalid NAME
	}
	for _, h := range all {
		if h.Name == name {
			hs = append(hs, h)
		}
	}
	return hs, true, nil
}

// sameHolds reports whether a and b are the same holds (by ID and token),
// in any order.
func sameHolds(a, b []padlock.Holder) bool {
	if len(a) != len(b) {
		return false
	}
	type hold struct {
		id    string
		token uint64
	}
	left := map[hold]int{}
	for _, h := range a {
		left[hold{h.ID, h.Token}]++
	}
	for _, h := range b {
		k := hold{h.ID, h.Token}
		if left[k] == 0 {
			return false
		}
		left[k]--
	}
	return true
}

func describe(h padlock.Holder) string {
	s := fmt.Sprintf("token %d", h.Token)
	if h.Host != "" {
		s += fmt.Sprintf(", %s pid %d", h.Host, h.PID)
	}
	if h.Owner != "" {
		s += fmt.Sprintf(", owner %q", h.Owner)
	}
	return s
}

// parseOne parses flags and at most one argument (exactly one if needed).
func parseOne(fs *flag.FlagSet, args []string, needed bool) (string, error) {
	if err := parseFlags(fs, args); err != nil {
		return "", err
	}
	switch {
	case fs.NArg() > 1:
		return "", usageError{fmt.Errorf("%s takes one argument, got %q", fs.Name(), fs.Args())}
	case fs.NArg() == 0 && needed:
		return "", usageError{fmt.Errorf("%s needs a lock name", fs.Name())}
	case fs.NArg() == 0:
		return "", nil
	}
	return fs.Arg(0), nil
}

// openURL opens the Locker of an operator command.
func openURL(ctx context.Context, url string) (*padlock.Locker, error) {
	if url == "" {
		return nil, usageError{errors.New("needs --url or $PADLOCK_URL")}
	}
	l, err := padlock.Open(ctx, url)
	return l, asUsage(err)
}

type holderJSON struct {
	Name    string     `json:"name"`
	Token   uint64     `json:"token"`
	ID      string     `json:"id"`
	Host    string     `json:"host,omitempty"`
	PID     int        `json:"pid,omitempty"`
	Owner   string     `json:"owner,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
	Expires *time.Time `json:"expires,omitempty"`
	Waiters int        `json:"waiters"`
	Kind    string     `json:"kind"`
	Limit   int        `json:"limit,omitempty"`
	Value   string     `json:"value,omitempty"`
}

func writeJSON(w io.Writer, hs []padlock.Holder) error {
	out := make([]holderJSON, len(hs))
	kinds := kindsOf(hs)
	for i, h := range hs {
		out[i] = holderJSON{Name: h.Name, Token: h.Token, ID: h.ID, Host: h.Host, PID: h.PID, Owner: h.Owner, Waiters: h.Waiters,
			Kind: kinds[i], Value: h.Value}
		if h.Limit > 1 {
			out[i].Limit = h.Limit
		}
		if !h.Since.IsZero() {
			out[i].Since = &hs[i].Since
		}
		if !h.Expires.IsZero() {
			out[i].Expires = &hs[i].Expires
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writeTable(w io.Writer, hs []padlock.Holder, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tTOKEN\tOWNER\tHOST\tPID\tAGE\tLEASE LEFT\tWAITERS\tVALUE")
	kinds := kindsOf(hs)
	for i, h := range hs {
		waiters := "?"
		if h.Waiters >= 0 {
			waiters = fmt.Sprint(h.Waiters)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Name, kinds[i], h.Token, dash(h.Owner), dash(h.Host),
			dash(pid(h.PID)), since(now, h.Since), until(now, h.Expires), waiters, shortValue(h))
	}
	return tw.Flush()
}

// kindsOf names each hold's kind: "writer" (a mutex, or the writer side of
// a read-write lock), "reader", "permit k/n" of a semaphore of n, k
// counting the name's permits in the listing's order (by token), or
// "leader" (the holder of an election, whose value is Holder.Value).
func kindsOf(hs []padlock.Holder) []string {
	out := make([]string, len(hs))
	permit := map[string]int{}
	for i, h := range hs {
		switch {
		case h.Elect:
			out[i] = "leader"
		case h.Mode == padlock.Shared:
			out[i] = "reader"
		case h.Limit > 1:
			permit[h.Name]++
			out[i] = fmt.Sprintf("permit %d/%d", permit[h.Name], h.Limit)
		default:
			out[i] = "writer"
		}
	}
	return out
}

// shortValue is a leader's value as the table shows it: quoted, so that
// spaces and control characters cannot break the row, and cut at 40
// bytes ("-" for a hold that is no candidacy). --json prints it whole.
func shortValue(h padlock.Holder) string {
	if !h.Elect {
		return "-"
	}
	v := h.Value
	if len(v) > 40 {
		return strconv.Quote(v[:40]) + "…"
	}
	return strconv.Quote(v)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func pid(p int) string {
	if p == 0 {
		return ""
	}
	return fmt.Sprint(p)
}

func since(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Round(time.Second).String()
}

func until(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Sub(now).Round(time.Second).String()
}
