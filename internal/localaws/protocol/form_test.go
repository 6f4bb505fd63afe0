package protocol

import (
	"net/url"
	"slices"
	"testing"
)

// One reader for both list spellings: EC2's Name.N and the Query services'
// Name.member.N, in index order; what nobody read is refused by name.
func TestParamsLists(t *testing.T) {
	for _, tt := range []struct {
		dialect     Dialect
		form        string
		want        []string
		unknown     string
		unknownCode string
	}{
		{EC2, "Action=X&Id.2=b&Id.1=a&Id.10=c", []string{"a", "b", "c"}, "", ""},
		{EC2, "Action=X&Id.1=a&Id.01=z", []string{"a"}, "Id.01", "UnknownParameter"},
		{EC2, "Action=X&Id.1=a&Colour=red", []string{"a"}, "Colour", "UnknownParameter"},
		{Query, "Action=X&Id.member.2=b&Id.member.1=a", []string{"a", "b"}, "", ""},
		{Query, "Action=X&Id.member.0=a", nil, "Id.member.0", "ValidationError"},
	} {
		form, err := url.ParseQuery(tt.form)
		if err != nil {
			t.Fatal(err)
		}
		p := ParseForm(form, tt.dialect)
		if got := p.StrList("Id"); !slices.Equal(got, tt.want) {
			t.Errorf("%s: list %q, want %q", tt.form, got, tt.want)
		}
		e := p.Finish()
		switch {
		case tt.unknown == "" && e != nil:
			t.Errorf("%s: %v", tt.form, e)
		case tt.unknown != "" && (e == nil || e.Code != tt.unknownCode || p.Unknown() != tt.unknown):
			t.Errorf("%s: %v, unknown %q, want %s naming %s", tt.form, e, p.Unknown(), tt.unknownCode, tt.unknown)
		}
	}
}

// A page's token leads to the next page, and the last page has none; a token the pager
// did not make is refused.
func TestPage(t *testing.T) {
	items := []int{1, 2, 3, 4, 5}
	var got []int
	token, pages := "", 0
	for {
		page, next, ok := Page(items, token, 2)
		if !ok {
			t.Fatalf("token %q refused", token)
		}
		got, pages = append(got, page...), pages+1
		if next == "" {
			break
		}
		token = next
	}
	if !slices.Equal(got, items) || pages != 3 {
		t.Errorf("%d pages of %v", pages, got)
	}
	for _, bad := range []string{"!!", "b2Zmc2V0Oi0x", "aS0x"} {
		if ValidPageToken(bad) {
			t.Errorf("token %q taken", bad)
		}
	}
}
