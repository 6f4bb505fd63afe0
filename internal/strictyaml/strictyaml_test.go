package strictyaml

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

type inner struct {
	Name  string            `json:"name"`
	Count int               `json:"count,omitempty"`
	Tags  map[string]string `json:"tags,omitempty"`
	Data  []byte            `json:"data,omitempty"`
}

type meta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

type thing struct {
	meta  `json:",inline"`
	Items []inner `json:"items,omitempty"`
	Spare any     `json:"spare,omitempty" note:"spare is not used"`
	Flag  *bool   `json:"flag,omitempty"`
}

var opts = Options{APIVersion: "example.io/v1", Kind: "Thing", NoteTag: "note", UseNumber: true}

const good = `apiVersion: example.io/v1
kind: Thing
items:
  - name: a
    count: 2
    tags: {x: z}
spare: {b: [1, 2], c: 3}
`

func TestDecode(t *testing.T) {
	var th thing
	doc, err := Decode([]byte(good), "t.yaml", &th, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(th.Items) != 1 || th.Items[0].Name != "a" || th.Items[0].Count != 2 || th.Items[0].Tags["x"] != "z" {
		t.Errorf("decoded %+v", th)
	}
	if got := doc.Line("items[0].tags"); got != 6 {
		t.Errorf("Line(items[0].tags) = %d", got)
	}
	var notes []string
	for _, n := range doc.Notes {
		notes = append(notes, n.Field+"="+n.Value+"@"+strconv.Itoa(n.Line))
	}
	if strings.Join(notes, " ") != "spare.b=[1, 2]@7 spare.c=3@7" {
		t.Errorf("notes = %v", notes)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, doc string
		want      string
		sentinel  error
	}{
		{"misspelt", strings.Replace(good, "count:", "cuont:", 1), `t.yaml, line 5: field items[0].cuont: unknown field (did you mean "count"?)`, nil},
		{"prefix", strings.Replace(good, "name:", "name-x:", 1), `field items[0].name-x: unknown field (did you mean "name"?)`, nil},
		{"case", strings.Replace(good, "items:", "Items:", 1), `field Items: unknown field (did you mean "items"? field names are case-sensitive)`, nil},
		{"far", good + "zzzzzzzz: 1\n", `field zzzzzzzz: unknown field (known fields here: apiVersion, flag, items, kind, spare)`, nil},
		{"duplicate", good + "items: []\n", `line 8: field items: given twice (first on line 3) (keep one)`, nil},
		{"wrong type", good + "flag: maybe\n", `line 8: field flag: a string cannot be a bool`, nil},
		{"wrong type in a list", strings.Replace(good, "count: 2", "count: two", 1), `line 5: field items.count: a string cannot be a int`, nil},
		{"base64", strings.Replace(good, "tags: {x: z}", "data: '-----BEGIN'", 1), "field items[0].data: not base64", nil},
		{"wrong kind", "apiVersion: v1\nkind: ConfigMap\n", `line 2: not a Thing: kind "ConfigMap" of apiVersion "v1"`, ErrWrongKind},
		{"wrong version", "apiVersion: example.io/v2\nkind: Thing\n", `line 1: field apiVersion: version "example.io/v2" is not supported (want example.io/v1)`, nil},
		{"no kind", "apiVersion: example.io/v1\n", "field kind: missing (want kind: Thing)", nil},
		{"syntax", "apiVersion: example.io/v1\nkind: Thing\n items: [\n", "t.yaml, line 3: syntax error", nil},
		{"two documents", good + "---\n" + good, "line 8: more than one YAML document", nil},
		{"not an object", "- a\n", "not a YAML or JSON object", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var th thing
			_, err := Decode([]byte(tt.doc), "t.yaml", &th, opts)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\nlacks %q", err, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("%v is not an *Error", err)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("%v is not %v", err, tt.sentinel)
			}
		})
	}
}

func TestDecodeList(t *testing.T) {
	var items []inner
	if _, err := Decode([]byte("- name: a\n- name: b\n  count: 2\n"), "l.yaml", &items, Options{}); err != nil || len(items) != 2 || items[1].Count != 2 {
		t.Fatalf("%+v, %v", items, err)
	}
	_, err := Decode([]byte("- name: a\n- naem: b\n"), "l.yaml", &items, Options{})
	if err == nil || !strings.Contains(err.Error(), `l.yaml, line 2: field [1].naem: unknown field (did you mean "name"?)`) {
		t.Errorf("error %v", err)
	}
}

func TestSplit(t *testing.T) {
	docs, err := Split([]byte("---\n"+good+"---\n---\napiVersion: example.io/v1\nkind: Thing\nbad: 1\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || docs[1].Index != 3 {
		t.Fatalf("docs = %+v", docs)
	}
	if av, kind := docs[1].Head(); av != "example.io/v1" || kind != "Thing" {
		t.Errorf("head = %s %s", av, kind)
	}
	var th thing
	if _, err := DecodeDocument(docs[0], "s.yaml", &th, opts); err != nil || th.Items[0].Name != "a" {
		t.Errorf("first document: %+v, %v", th, err)
	}
	_, err = DecodeDocument(docs[1], "s.yaml", &th, opts)
	if err == nil || !strings.Contains(err.Error(), "s.yaml, line 13: field bad: unknown field") {
		t.Errorf("second document: %v", err)
	}
}

// FuzzDecode checks two properties: a value that decodes re-encodes (as JSON) to a
// document that decodes to a value of the same encoding, and an error always names the source and
// is an *Error.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`{"apiVersion":"example.io/v1","kind":"Thing","items":[{"name":"x","data":"AAE="}],"flag":true}`))
	f.Add([]byte("apiVersion: example.io/v1\nkind: Thing\nitems: &a\n  - name: *a\n"))
	f.Add([]byte("apiVersion: example.io/v1\nkind: Thing\nitems: [{name: a, name: b}]\n"))
	o := opts
	o.UseNumber = false
	f.Fuzz(func(t *testing.T, data []byte) {
		var th thing
		_, err := Decode(data, "fuzz.yaml", &th, o)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error %q does not name the source", err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%v is not an *Error", err)
			}
			return
		}
		js, err := json.Marshal(th)
		if err != nil {
			t.Fatal(err)
		}
		var again thing
		if _, err := Decode(js, "again", &again, o); err != nil {
			t.Fatalf("re-encoded %s: %v", js, err)
		}
		// Compared as JSON: an empty list and no list encode alike.
		if js2, _ := json.Marshal(again); string(js) != string(js2) {
			t.Fatalf("round trip: %s != %s", js, js2)
		}
	})
}
