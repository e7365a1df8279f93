package diffusiongemma

import "fmt"

// ParseConfig parses config.json bytes in either layout, derives the defaulted fields and
// validates the result, as LoadConfig does for a directory without generation_config.json:
// the tests' way to try a config without writing files.
func ParseConfig(data []byte) (*Config, error) {
	c, err := parseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("diffusiongemma: parse config.json: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
