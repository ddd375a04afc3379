package fence

import "github.com/padlock-go/padlock/driverkit"

// sameSlot returns ErrCrossSlot (with ErrInvalid) unless every key hashes
// to keys[0]'s slot.
func sameSlot(keys []string) error {
	want := driverkit.ClusterSlot(keys[0])
	for _, k := range keys[1:] {
		if s := driverkit.ClusterSlot(k); s != want {
			return invalid("%w: token key %q is in slot %d, key %q in slot %d; give them one hash tag, such as the resource \"{orders/42}\" and the key \"{orders/42}:total\"",
				ErrCrossSlot, keys[0], want, k, s)
		}
	}
	return nil
}
