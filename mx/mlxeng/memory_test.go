//go:build mlx

package mlxeng

import (
	"testing"

	"github.com/dgtune/dgtune/mx"
)

func TestDefaultMemoryLimit(t *testing.T) {
	for _, c := range []struct{ total, want int64 }{
		{80 << 30, 56 << 30},               // 70 % of an 80 GiB card
		{140 << 30, 98 << 30},              // an H200's 140 GiB: 98 GiB
		{200 << 30, MaxDefaultMemoryLimit}, // capped
	} {
		if got := defaultMemoryLimit(c.total); got != c.want {
			t.Errorf("defaultMemoryLimit(%d GiB) = %d, want %d", c.total>>30, got, c.want)
		}
	}
}

func TestMemoryLimitRoundTrip(t *testing.T) {
	e, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	before, err := e.MemoryLimit()
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := mx.SetMemoryLimit(e, 3<<30); !ok || err != nil {
		t.Fatalf("SetMemoryLimit = %v, %v", ok, err)
	}
	if got, _ := e.MemoryLimit(); got != 3<<30 {
		t.Errorf("limit %d after setting 3 GiB", got)
	}
	if _, err := e.SetMemoryLimit(before); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetMemoryLimit(0); err == nil {
		t.Error("a zero limit was accepted")
	}
	d, err := e.DeviceInfo()
	if err != nil || d.Kind != e.Device() {
		t.Errorf("DeviceInfo = %+v, %v; want kind %s", d, err, e.Device())
	}
}
