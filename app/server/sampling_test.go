package server

import (
	"testing"

	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
)

func TestSamplingDefaults(t *testing.T) {
	f32 := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	seed := int64(9)
	for _, tc := range []struct {
		name     string
		fields   samplingFields
		thinking bool
		want     model.Sampling
	}{
		{"none given, thinking: the model card's", samplingFields{Seed: &seed}, true, withSeed(sample.ModelCardDefaults(true), 9)},
		{"none given, no thinking", samplingFields{Seed: &seed}, false, withSeed(sample.ModelCardDefaults(false), 9)},
		{"temperature 0 is plain greedy", samplingFields{Temperature: f32(0), Seed: &seed}, false, model.Sampling{Seed: 9}},
		{"temperature 0 keeps a given penalty", samplingFields{Temperature: f32(0), RepetitionPenalty: f32(1.1), Seed: &seed}, false,
			model.Sampling{RepetitionPenalty: 1.1, Seed: 9}},
		{"given fields replace the defaults", samplingFields{Temperature: f32(0.3), TopK: i(5), TopP: f32(0.5), MinP: f32(0.1), PresencePenalty: f32(0), FrequencyPenalty: f32(0.2), Seed: &seed}, true,
			model.Sampling{Temperature: 0.3, TopK: 5, TopP: 0.5, MinP: 0.1, FrequencyPenalty: 0.2, Seed: 9}},
		{"a negative seed wraps", samplingFields{Temperature: f32(0), Seed: func() *int64 { s := int64(-1); return &s }()}, false, model.Sampling{Seed: ^uint64(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fields.resolve(tc.thinking); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// Without a seed the request names none, and its turn draws one
	// (engine.StartTurn).
	if seed := (samplingFields{}).seed(); seed != nil {
		t.Errorf("a request without a seed names %d", *seed)
	}
}

func withSeed(s model.Sampling, seed uint64) model.Sampling {
	s.Seed = seed
	return s
}
