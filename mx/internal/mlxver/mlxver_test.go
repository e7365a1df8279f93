package mlxver

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
	}{
		{"0.32.1", Version{0, 32, 1}},
		{"v0.31.2", Version{0, 31, 2}},
		{"0.32.1.dev20260822+3a62199", Version{0, 32, 1}},
		{"1.0.10", Version{1, 0, 10}},
	} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "0.32", "latest", "x0.32.1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestAtLeast(t *testing.T) {
	order := []Version{{0, 9, 9}, {0, 31, 2}, {0, 32, 0}, {0, 32, 1}, {0, 33, 0}, {1, 0, 0}}
	for i, a := range order {
		for j, b := range order {
			if got := a.AtLeast(b); got != (i >= j) {
				t.Errorf("%v.AtLeast(%v) = %v", a, b, got)
			}
		}
	}
	if Oldest.String() != "0.31.2" || !Newest.AtLeast(Oldest) {
		t.Errorf("range %v–%v", Oldest, Newest)
	}
}
