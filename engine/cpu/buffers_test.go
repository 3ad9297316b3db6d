package cpu

import (
	"math/rand/v2"
	"testing"
)

// TestSizeClass checks that a class's capacity holds the request with at
// most a quarter to spare (or 16 elements), that a capacity maps back to
// its own class, and that classes grow with the request.
func TestSizeClass(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	sizes := []int{0, 1, 15, 16, 17, 19, 20, 21, 31, 32, 33, 1 << 20, 1<<20 + 1, 4219 * 1024, 1<<40 + 3}
	for range 10000 {
		sizes = append(sizes, 1+rng.IntN(1<<26))
	}
	lastClass := -1
	for n := range 5000 {
		c, _ := sizeClass(n)
		if c < lastClass {
			t.Fatalf("class of %d is %d, below %d's", n, c, n-1)
		}
		lastClass = c
		sizes = append(sizes, n)
	}
	for _, n := range sizes {
		c, size := sizeClass(n)
		if size < n || size > n+n/4+16 {
			t.Fatalf("%d elements: capacity %d", n, size)
		}
		if c < 0 || c >= sizeClasses {
			t.Fatalf("%d elements: class %d outside [0, %d)", n, c, sizeClasses)
		}
		if c2, size2 := sizeClass(size); c2 != c || size2 != size {
			t.Fatalf("%d elements: class %d capacity %d, but that capacity's class is %d (capacity %d)", n, c, size, c2, size2)
		}
	}
}

// TestBuffersRecycled checks that a buffer handed back comes out again
// zeroed and of the length asked.
func TestBuffersRecycled(t *testing.T) {
	p := getFloats(1000)
	for i := range *p {
		(*p)[i] = 1
	}
	putFloats(p)
	for range 3 {
		q := getFloats(999)
		if len(*q) != 999 {
			t.Fatalf("length %d, want 999", len(*q))
		}
		for i, v := range *q {
			if v != 0 {
				t.Fatalf("element %d is %v, want 0", i, v)
			}
		}
		putFloats(q)
	}
}
