package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// schemaCases cover every supported keyword; good texts must be accepted
// and bad ones refused.
var schemaCases = []struct {
	name   string
	schema string
	good   []string
	bad    []string
}{
	{
		name:   "object with required and optional properties",
		schema: `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","tags"],"additionalProperties":false}`,
		good:   []string{`{"name":"Ann","tags":[]}`, `{"name":"A\"n\\n\u00e9","age":-12,"tags":["x","y"]}`, "{\n  \"name\": \"日本\",\n  \"tags\": [ \"a\" ]\n}"},
		bad:    []string{`{"tags":[],"name":"Ann"}`, `{"name":"Ann"}`, `{"name":"Ann","age":1.5,"tags":[]}`, `{"name":"Ann","tags":[],"x":1}`, `{"name":"A` + "\n" + `","tags":[]}`, `{"name":"Ann","tags":[]} `},
	},
	{
		name:   "nested objects, enum, const, booleans, null",
		schema: `{"type":"object","properties":{"kind":{"const":"point"},"at":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]},"color":{"enum":["red","green",null,3]},"ok":{"type":"boolean"},"none":{"type":"null"}},"required":["kind","at","color","ok","none"]}`,
		good:   []string{`{"kind":"point","at":{"x":1.25e-3,"y":0},"color":null,"ok":true,"none":null}`, `{"kind":"point","at":{"x":-0.5,"y":10},"color":3,"ok":false,"none":null}`},
		bad:    []string{`{"kind":"line","at":{"x":1,"y":0},"color":null,"ok":true,"none":null}`, `{"kind":"point","at":{"x":1},"color":"red","ok":true,"none":null}`, `{"kind":"point","at":{"x":01,"y":0},"color":"red","ok":true,"none":null}`},
	},
	{
		name:   "anyOf, type lists, nullable, $ref",
		schema: `{"$defs":{"pet":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}},"type":"object","properties":{"id":{"anyOf":[{"type":"integer"},{"type":"string","format":"uuid"}]},"pet":{"$ref":"#/$defs/pet"},"note":{"type":["string","null"]},"score":{"type":["number","null"]}},"required":["id","pet","note","score"]}`,
		good:   []string{`{"id":7,"pet":{"name":"Rex"},"note":null,"score":null}`, `{"id":"123e4567-e89b-12d3-a456-426614174000","pet":{"name":""},"note":"hi","score":2}`},
		bad:    []string{`{"id":true,"pet":{"name":"Rex"},"note":null,"score":null}`, `{"id":"abc","pet":{"name":"Rex"},"note":null,"score":null}`},
	},
	{
		name:   "array bounds, tuples, string lengths, formats",
		schema: `{"type":"object","properties":{"pair":{"type":"array","prefixItems":[{"type":"string","minLength":1,"maxLength":3},{"type":"integer"}],"items":false,"minItems":2},"few":{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":3},"when":{"type":"string","format":"date-time"},"day":{"type":"string","format":"date"}},"required":["pair","few","when","day"]}`,
		good:   []string{`{"pair":["abc",1],"few":[true],"when":"2024-02-28T23:59:59.5+01:00","day":"2025-12-31"}`, `{"pair":["\n",0],"few":[true,false,true],"when":"2024-01-01T00:00:00Z","day":"2025-04-30"}`},
		bad:    []string{`{"pair":["",1],"few":[true],"when":"2024-02-28T23:59:59Z","day":"2025-12-31"}`, `{"pair":["abcd",1],"few":[true],"when":"2024-02-28T23:59:59Z","day":"2025-12-31"}`, `{"pair":["a",1],"few":[],"when":"2024-02-28T23:59:59Z","day":"2025-12-31"}`, `{"pair":["a",1],"few":[true,true,true,true],"when":"2024-02-28T23:59:59Z","day":"2025-12-31"}`, `{"pair":["a",1],"few":[true],"when":"2024-02-28","day":"2025-12-31"}`, `{"pair":["a",1],"few":[true],"when":"2024-02-28T23:59:59Z","day":"2025-04-31"}`},
	},
	{
		name:   "maps and open values",
		schema: `{"type":"object","properties":{"counts":{"type":"object","additionalProperties":{"type":"integer"}},"extra":{},"anything":true},"required":["counts","extra","anything"]}`,
		good:   []string{`{"counts":{},"extra":[1,{"a":null}],"anything":"x"}`, `{"counts":{"a":1,"b":2},"extra":{"k":[true]},"anything":{}}`},
		bad:    []string{`{"counts":{"a":"1"},"extra":1,"anything":1}`, `{"counts":{},"extra":[[[[[1]]]]],"anything":1}`},
	},
	{
		name:   "integer ranges and a non-negative number",
		schema: `{"type":"object","properties":{"age":{"type":"integer","minimum":0,"maximum":130},"delta":{"type":"integer","exclusiveMinimum":-40.5,"exclusiveMaximum":7},"year":{"type":"integer","minimum":1900},"price":{"type":"number","minimum":0}},"required":["age","delta","year","price"]}`,
		good:   []string{`{"age":0,"delta":-40,"year":1900,"price":0}`, `{"age":130,"delta":6,"year":99999,"price":12.5e3}`, `{"age":42,"delta":0,"year":2025,"price":0.01}`},
		bad:    []string{`{"age":131,"delta":0,"year":2000,"price":1}`, `{"age":-1,"delta":0,"year":2000,"price":1}`, `{"age":1,"delta":7,"year":2000,"price":1}`, `{"age":1,"delta":-41,"year":2000,"price":1}`, `{"age":1,"delta":0,"year":1899,"price":1}`, `{"age":1,"delta":0,"year":2000,"price":-1}`, `{"age":007,"delta":0,"year":2000,"price":1}`, `{"age":-0,"delta":0,"year":2000,"price":1}`},
	},
	{
		name:   "patterns",
		schema: `{"type":"object","properties":{"zip":{"type":"string","pattern":"^[0-9]{5}(-[0-9]{4})?$"},"code":{"type":"string","pattern":"^(?i)[a-c]{2}\\d+$"},"any":{"type":"string","pattern":"ab"},"q":{"type":"string","pattern":"^[\"\\\\é-ë\\x00-\\x02]*.?$"}},"required":["zip","code","any","q"]}`,
		good:   []string{`{"zip":"12345","code":"aB12","any":"xxabyy","q":"\"\\é\u0001ë"}`, `{"zip":"12345-6789","code":"cc0","any":"ab","q":""}`},
		bad:    []string{`{"zip":"1234","code":"ab1","any":"ab","q":""}`, `{"zip":"12345","code":"ad1","any":"ab","q":""}`, `{"zip":"12345","code":"ab1","any":"a b","q":""}`, `{"zip":"12345","code":"ab1","any":"ab","q":"ab"}`},
	},
	{
		name:   "top-level array of enums",
		schema: `{"type":"array","items":{"type":"string","enum":["a","b\"c"]}}`,
		good:   []string{`[]`, `["a","b\"c","a"]`},
		bad:    []string{`["c"]`, `[ ]  `},
	},
}

func TestSchemaAcceptsAndRejects(t *testing.T) {
	_, _, vocab := demoModel(t)
	for _, c := range schemaCases {
		t.Run(c.name, func(t *testing.T) {
			g, err := JSONSchema(vocab, []byte(c.schema), Options{})
			if err != nil {
				t.Fatal(err)
			}
			v := validator(t, c.schema)
			for _, text := range c.good {
				if err := validate(v, text); err != nil {
					t.Fatalf("test case is wrong: %s does not validate: %v", text, err)
				}
				if !accepts(g, text) {
					t.Errorf("refused %s", text)
				}
			}
			for _, text := range c.bad {
				if accepts(g, text) {
					t.Errorf("accepted %q", text)
				}
			}
		})
	}
}

// TestRandomWalksValidate is the property test: random walks through each
// schema's automaton, byte by byte, always end in text that parses and
// that the validator accepts.
func TestRandomWalksValidate(t *testing.T) {
	_, _, vocab := demoModel(t)
	walks := 300
	if testing.Short() {
		walks = 50
	}
	for i, c := range schemaCases {
		t.Run(c.name, func(t *testing.T) {
			g, err := JSONSchema(vocab, []byte(c.schema), Options{})
			if err != nil {
				t.Fatal(err)
			}
			v := validator(t, c.schema)
			dist := distances(t, g)
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for range walks {
				text := randomText(g, dist, rng, rng.IntN(200))
				if err := validate(v, text); err != nil {
					t.Fatalf("random walk wrote %q: %v", text, err)
				}
			}
		})
	}
}

// TestJSONObject: json_object's random walks are JSON objects.
func TestJSONObject(t *testing.T) {
	_, _, vocab := demoModel(t)
	g, err := JSONObject(vocab, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{`{}`, `{"a":[1,{"b":null}],"c":"\u00e9"}`, "{\n\t\"x\": -0.5E+3\n}"} {
		if !accepts(g, text) {
			t.Errorf("refused %s", text)
		}
	}
	for _, text := range []string{`[]`, `"x"`, `{"a":1,}`, `{"a" 1}`, `{"a":[[[[[1]]]]]}`, "{  \"a\":1}", "{\n\n\"a\":1}"} {
		if accepts(g, text) {
			t.Errorf("accepted %q", text)
		}
	}
	dist := distances(t, g)
	rng := rand.New(rand.NewPCG(9, 9))
	for range 300 {
		text := randomText(g, dist, rng, rng.IntN(300))
		var obj map[string]any
		if err := json.Unmarshal([]byte(text), &obj); err != nil {
			t.Fatalf("random walk wrote %q: %v", text, err)
		}
	}
}

func TestUnsupportedKeywordsAreNamed(t *testing.T) {
	_, _, vocab := demoModel(t)
	cases := []struct{ schema, keyword, path string }{
		{`{"type":"string","pattern":"(a)\\1"}`, "pattern", "#"},
		{`{"type":"string","pattern":"a\\bc"}`, "pattern", "#"},
		{`{"type":"object","properties":{"n":{"type":"number","maximum":1.5}}}`, "maximum", "#/properties/n"},
		{`{"type":"array","items":{"type":"string"},"uniqueItems":true}`, "uniqueItems", "#"},
		{`{"type":"object","properties":{"a":{"not":{}}}}`, "not", "#/properties/a"},
		{`{"type":"string","format":"email"}`, "format", "#"},
		{`{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`, "$ref", "#/$defs/n/properties/next"},
		{`{"type":"array","maxItems":100000}`, "maxItems", "#"},
		{`{"frobnicate":1}`, "frobnicate", "#"},
	}
	for _, c := range cases {
		_, err := JSONSchema(vocab, []byte(c.schema), Options{})
		var se *SchemaError
		if !errors.As(err, &se) || se.Keyword != c.keyword || se.Path != c.path {
			t.Errorf("%s: error %v, want keyword %q at %s", c.schema, err, c.keyword, c.path)
			continue
		}
		if !strings.Contains(err.Error(), `"`+c.keyword+`"`) {
			t.Errorf("%s: message %q does not name %q", c.schema, err, c.keyword)
		}
	}
	for _, bad := range []string{`{"type":"strin"}`, `not json`, `false`, `{"enum":[]}`, `{"type":"integer","enum":["a"]}`} {
		if _, err := JSONSchema(vocab, []byte(bad), Options{}); err == nil {
			t.Errorf("%s: compiled, want an error", bad)
		}
	}
}

// FuzzJSONSchema: any input compiles or fails with an error, never a panic
// or a runaway allocation, and a compiled grammar's masks can be computed.
func FuzzJSONSchema(f *testing.F) {
	for _, c := range schemaCases {
		f.Add(c.schema)
	}
	f.Add(`{"type":"array","items":{"type":"array","items":{"type":"array","maxItems":256},"maxItems":256},"maxItems":256}`)
	f.Add(`{"anyOf":[{"type":"string","maxLength":200},{"type":"string","minLength":3}]}`)
	f.Add(`{"type":"string","pattern":"^(?i)[a-z\\d]{2,5}(x|y+)*.?$"}`)
	_, _, vocab := demoModel(f)
	f.Fuzz(func(t *testing.T, schema string) {
		g, err := JSONSchema(vocab, []byte(schema), Options{})
		if err != nil {
			return
		}
		c := g.NewConstraint()
		c.Mask(make([]float32, vocab.width))
		c.Done()
	})
}

// TestIntegerRange checks the range automaton against arithmetic on random
// bounds: near each bound, at zero and at random points.
func TestIntegerRange(t *testing.T) {
	_, _, vocab := demoModel(t)
	rng := rand.New(rand.NewPCG(7, 7))
	random := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return int64(rng.IntN(21)) - 10
		case 1:
			return int64(rng.IntN(2001)) - 1000
		case 2:
			return rng.Int64N(2e9) - 1e9
		}
		return rng.Int64N(2*maxMagnitude) - maxMagnitude
	}
	for range 200 {
		lo, hi := random(), random()
		if lo > hi {
			lo, hi = hi, lo
		}
		schema := fmt.Sprintf(`{"type":"integer","minimum":%d,"maximum":%d}`, lo, hi)
		g, err := JSONSchema(vocab, []byte(schema), Options{})
		if err != nil {
			t.Fatal(err)
		}
		probes := []int64{lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 0, -1, 1, (lo + hi) / 2}
		for range 10 {
			probes = append(probes, random())
		}
		for _, x := range probes {
			want := lo <= x && x <= hi && x >= -maxMagnitude && x <= maxMagnitude
			if got := accepts(g, strconv.FormatInt(x, 10)); got != want {
				t.Fatalf("[%d, %d]: %d accepted %v, want %v", lo, hi, x, got, want)
			}
		}
	}
}
