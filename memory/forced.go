package memory

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/padlock-go/padlock/backends"
)

var _ backends.ForcedLister = (*driver)(nil)

// recordForcedLocked keeps the record of h's forced release, with the
// store's lock held, and drops the records older than ForcedRetention.
func (s *store) recordForcedLocked(h backends.Holder) {
	now := time.Now()
	s.forced = slices.DeleteFunc(s.forced, func(f backends.ForcedRelease) bool {
		return now.Sub(f.At) > backends.ForcedRetention
	})
	s.forced = append(s.forced, backends.ForcedRelease{Name: h.Name, Token: h.Token, ID: h.ID, At: now})
}

// ForcedReleases lists the store's records of forced releases under
// prefix.
func (d *driver) ForcedReleases(ctx context.Context, prefix string) ([]backends.ForcedRelease, error) {
	s := d.s
	d.lockFor()
	defer s.mu.Unlock()
	if err := d.reachable(); err != nil {
		return nil, err
	}
	var out []backends.ForcedRelease
	for _, f := range s.forced {
		if strings.HasPrefix(f.Name, prefix) {
			out = append(out, f)
		}
	}
	slices.SortStableFunc(out, func(a, b backends.ForcedRelease) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
