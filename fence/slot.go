package fence

import "strings"

// The Redis Cluster key slot, as CLUSTER KEYSLOT computes it: CRC16
// (XMODEM) of the key's hash tag (the part between the first '{' and the
// next '}', when not empty) or else of the whole key, modulo 16384.

const clusterSlots = 16384

func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % clusterSlots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), Redis Cluster's.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// sameSlot returns ErrCrossSlot (with ErrInvalid) unless every key hashes
// to keys[0]'s slot.
func sameSlot(keys []string) error {
	want := keySlot(keys[0])
	for _, k := range keys[1:] {
		if s := keySlot(k); s != want {
			return invalid("%w: token key %q is in slot %d, key %q in slot %d; give them one hash tag, such as the resource \"{orders/42}\" and the key \"{orders/42}:total\"",
				ErrCrossSlot, keys[0], want, k, s)
		}
	}
	return nil
}
