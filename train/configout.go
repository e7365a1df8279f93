package train

import (
	"fmt"

	"github.com/dgtune/dgtune/config"
)

// scheduleNote says which learning rate a run starts from when an lr_schedule gives its
// own initial value (mlx-lm's rule: the schedule's first argument, not learning_rate), so
// that a learning_rate which no longer applies is not silently ignored. "" when the
// schedule starts at learning_rate.
func scheduleNote(c config.Config) string {
	s := c.LRSchedule
	if len(s.Arguments) == 0 || s.Arguments[0] == c.LearningRate {
		return ""
	}
	return fmt.Sprintf("note: lr_schedule %s starts at %g (lr_schedule.arguments[0]); learning_rate %g is not used",
		s.Name, s.Arguments[0], c.LearningRate)
}
