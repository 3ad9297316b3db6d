package prefixstore

import (
	"fmt"
	"io"
	"testing"
)

// BenchmarkWriteRead writes and reads back snapshots of the real model's
// size on the CPU backend (f32 KV): the 62.8 MiB of DeltaNet state and
// 40,960 bytes of K and V per token, for prefixes of 1,000 and 20,000
// tokens; b.SetBytes makes the MB/s the disk path's (buffering, SHA-256,
// the file system). Reads right after the write come from the page cache.
func BenchmarkWriteRead(b *testing.B) {
	const fixed, perToken = 65863680, 40960
	for _, tokens := range []int{1000, 20000} {
		size := fixed + perToken*tokens
		if testing.Short() && tokens > 1000 {
			continue
		}
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 13)
		}
		prompt := seq(tokens)
		b.Run(fmt.Sprintf("write/%d-tokens", tokens), func(b *testing.B) {
			s, _ := Open(Options{Dir: b.TempDir(), Log: func(string) {}})
			defer s.Close()
			b.SetBytes(int64(size))
			for i := range b.N {
				p := append(prompt[:tokens-1:tokens-1], i)
				s.Save(space, p, "", func(w io.Writer) error { _, err := w.Write(data); return err })
				s.Wait()
				s.Clear()
			}
		})
		b.Run(fmt.Sprintf("read/%d-tokens", tokens), func(b *testing.B) {
			s, _ := Open(Options{Dir: b.TempDir(), Log: func(string) {}})
			defer s.Close()
			s.Save(space, prompt, "", func(w io.Writer) error { _, err := w.Write(data); return err })
			s.Wait()
			buf := make([]byte, size)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				n := s.Load(space, prompt, 0, tokens, "", func(r io.Reader, _ []int) error {
					_, err := io.ReadFull(r, buf)
					return err
				})
				if n != tokens {
					b.Fatalf("loaded %d tokens", n)
				}
			}
		})
	}
}
