package bench

import (
	"math"
	"math/rand/v2"
)

// zipf draws integers in [0, n) with P(i) ∝ 1/(i+1)^θ, for any θ in
// (0, 1) ∪ (1, …): math/rand's Zipf needs s > 1, and the benchmark's
// skew, as YCSB's, is θ = 0.99. It is Gray et al.'s generator ("Quickly
// generating billion-record synthetic databases", SIGMOD 1994), as YCSB
// implements it.
type zipf struct {
	n                   int
	theta, alpha, zetan float64
	eta, half           float64
	r                   *rand.Rand
}

func newZipf(r *rand.Rand, n int, theta float64) *zipf {
	z := &zipf{n: n, theta: theta, r: r}
	zeta2 := zeta(2, theta)
	z.zetan = zeta(n, theta)
	z.alpha = 1 / (1 - theta)
	z.eta = (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/z.zetan)
	z.half = 1 + math.Pow(0.5, theta)
	return z
}

func zeta(n int, theta float64) float64 {
	s := 0.0
	for i := 1; i <= n; i++ {
		s += 1 / math.Pow(float64(i), theta)
	}
	return s
}

// next draws one key.
func (z *zipf) next() int {
	u := z.r.Float64()
	uz := u * z.zetan
	switch {
	case uz < 1:
		return 0
	case uz < z.half:
		return 1
	}
	k := int(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	return min(k, z.n-1)
}
