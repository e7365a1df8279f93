package goeng_test

import (
	"slices"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/goeng"
)

// An engine following an MLX release draws what that release draws: before v0.32.1
// categorical sampling of one distribution is Gumbel-max and randint truncates toward
// zero; from v0.32.1 on, inverse CDF and floor.
func TestFollowingMLX(t *testing.T) {
	newest := goeng.New()
	old, err := goeng.NewFollowing("0.31.2")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := goeng.NewFollowing("0.32.1.dev20260822+3a62199")
	if err != nil {
		t.Fatal(err)
	}
	if newest.FollowsMLX() != "0.32.1" || old.FollowsMLX() != "0.31.2" || dev.FollowsMLX() != "0.32.1" || (&goeng.Engine{}).FollowsMLX() != "0.32.1" {
		t.Errorf("follows %s / %s / %s", newest.FollowsMLX(), old.FollowsMLX(), dev.FollowsMLX())
	}
	logits := make([]float32, 50)
	for i := range logits {
		logits[i] = float32(i%7) * 0.3
	}
	// One distribution over 50 classes, non-scalar output: the path that changed. 20 keys
	// cannot all agree by chance.
	draw := func(e mx.Engine, key uint64) int32 {
		return mx.Categorical(mx.Key(e, key), mx.FromFloat32(e, logits, 1, 50), -1).Int32s()[0]
	}
	differ := 0
	for key := range uint64(20) {
		if draw(newest, key) != draw(dev, key) {
			t.Fatalf("key %d: a 0.32.1 development build draws otherwise than 0.32.1", key)
		}
		if draw(newest, key) != draw(old, key) {
			differ++
		}
	}
	if differ == 0 {
		t.Error("categorical of one distribution: 0.31.2 and 0.32.1 rules drew the same 20 samples")
	}
	// A batch of distributions takes Gumbel-max under both rules.
	batch := mx.Categorical(mx.Key(newest, 3), mx.FromFloat32(newest, logits, 5, 10), -1).Int32s()
	if got := mx.Categorical(mx.Key(old, 3), mx.FromFloat32(old, logits, 5, 10), -1).Int32s(); !slices.Equal(got, batch) {
		t.Errorf("batch categorical: 0.31.2 %v, 0.32.1 %v; want equal", got, batch)
	}
	// randint over a negative range: truncation before 0.32.1, floor after.
	u := mx.Uniform(mx.Key(newest, 9), []int{400}, -50, 50, mx.Float32).Float32s()
	cur := mx.Randint(mx.Key(newest, 9), []int{400}, -50, 50, mx.Int32).Int32s()
	was := mx.Randint(mx.Key(old, 9), []int{400}, -50, 50, mx.Int32).Int32s()
	for i := range u {
		if want := int32(u[i]); was[i] != want {
			t.Fatalf("0.31.2 randint[%d] = %d for u %v, want %d", i, was[i], u[i], want)
		}
		if u[i] < 0 && float32(int32(u[i])) != u[i] && cur[i] != was[i]-1 {
			t.Fatalf("0.32.1 randint[%d] = %d for u %v, want %d", i, cur[i], u[i], was[i]-1)
		}
	}
	if _, err := goeng.NewFollowing("main"); err == nil {
		t.Error("NewFollowing(main) succeeded")
	}
}
