package driverkit

import "strings"

// ClusterSlots is the number of Redis Cluster key slots.
const ClusterSlots = 16384

// ClusterSlot is the Redis Cluster slot of key, as CLUSTER KEYSLOT
// computes it: CRC16 (XMODEM) of the key's hash tag (the part between the
// first '{' and the next '}', when not empty), or else of the whole key,
// modulo ClusterSlots. go-redis keeps its own in an internal package.
func ClusterSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % ClusterSlots
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
