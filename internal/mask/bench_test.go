package mask

import (
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// benchMask is a mask over 20 values, as an add-on with a few secret inputs,
// generated values and a values Secret of several keys has.
func benchMask() *Mask {
	var secrets []string
	for i := 0; i < 20; i++ {
		secrets = append(secrets, fmt.Sprintf("s3cret-value-%02d-%s", i, strings.Repeat("x", i)))
	}
	return New(secrets)
}

func BenchmarkString(b *testing.B) {
	m := benchMask()
	message := "Deployment.apps \"web\" is invalid: spec.template.spec.containers[0].env[3].value: Invalid value: \"abc\": must be no more than 63 characters"
	var diff strings.Builder
	for diff.Len() < 16<<10 {
		diff.WriteString("-  replicas: 2\n+  replicas: 3\n   image: registry.example.com/team/web:1.2.3\n")
	}
	tests := []struct{ name, text string }{
		{"message", message},
		{"message with a value", message + " s3cret-value-07-xxxxxxx"},
		{"diff 16KiB", diff.String()},
		{"diff 16KiB with values", diff.String() + "s3cret-value-03-xxx s3cret-value-19-" + strings.Repeat("x", 19)},
		// Every value starts with the text's one word: the most each byte costs.
		{"16KiB of the values' common start", strings.Repeat("s3cret-value-", 16<<10/13)},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(tt.text)))
			for b.Loop() {
				m.String(tt.text)
			}
		})
	}
}

// BenchmarkStringRepetitive is the worst a tenant can make of a text and
// values it both controls: 128 KiB of one byte against 200 values that
// start with four thousand of that byte, so that a value starts at every
// position of the text. Where each value ends with that byte too, every
// value occurs at every position; where each ends with its number, none
// occurs at all, though each matches four thousand bytes everywhere.
func BenchmarkStringRepetitive(b *testing.B) {
	text := strings.Repeat("a", 128<<10)
	var occur, near []string
	for n := 0; n < 200; n++ {
		occur = append(occur, strings.Repeat("a", 4000+n))
		near = append(near, strings.Repeat("a", 4000)+strconv.Itoa(n))
	}
	tests := []struct {
		name string
		m    *Mask
	}{
		{"every value everywhere", New(occur)},
		{"no value, each 4000 bytes long everywhere", New(near)},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tt.m.String(text)
			}
		})
	}
}

// BenchmarkStringManyValues is a mask over 100,000 values that share their
// first four bytes (a writeOnly list in a chart's defaults, past what
// values.Compose takes), over 256 KiB of those four bytes' first: each byte
// of the text is read once, however many values share a start with it.
func BenchmarkStringManyValues(b *testing.B) {
	var values []string
	for i := range 100_000 {
		values = append(values, fmt.Sprintf("aaaa%06d", i))
	}
	b.Run("New", func(b *testing.B) {
		for b.Loop() {
			New(values)
		}
	})
	m := New(values)
	text := strings.Repeat("a", 256<<10)
	b.Run("String 256KiB", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			m.String(text)
		}
	})
	b.Run("Holds 256KiB", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			m.Holds(text)
		}
	})
}

// caBundle is a PEM bundle of about 207 KiB: 150 certificates of 1 KiB of
// random bytes each, in lines of 64 characters, as a values Secret's CA
// bundle holds.
func caBundle() string {
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	der := make([]byte, 1060)
	for range 150 {
		for i := range der {
			der[i] = byte(r.Uint32())
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	return b.String()
}

// randomValues returns n values of size random printable bytes.
func randomValues(n, size int) []string {
	r := rand.New(rand.NewPCG(3, 4))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.+/=%@:"
	values := make([]string, n)
	b := make([]byte, size)
	for i := range values {
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
		}
		values[i] = string(b)
	}
	return values
}

// BenchmarkNew is the cost of building a mask at the sizes values.Compose
// allows: a CA bundle of some 200 KiB and two passwords, and the bound of
// 4096 values of 64 bytes. Run it with -benchmem.
func BenchmarkNew(b *testing.B) {
	tests := []struct {
		name   string
		values []string
	}{
		{"20 values of 24 bytes", randomValues(20, 24)},
		{"1000 values of 64 bytes", randomValues(1000, 64)},
		{"CA bundle 207KiB and 2 passwords", []string{caBundle(), "hunter2-correct-horse", "battery-staple-42"}},
		{"4096 values of 64 bytes", randomValues(4096, 64)},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			var m *Mask
			for b.Loop() {
				m = New(tt.values)
			}
			b.ReportMetric(float64(m.Size())/(1<<20), "MiB-kept")
		})
	}
}
