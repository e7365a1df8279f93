package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// EnvName is the environment variable of a key: DGTUNE_ + the key in upper case with '_'
// for '.' ("lora_parameters.rank" → "DGTUNE_LORA_PARAMETERS_RANK").
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// checkEnv rejects what viper would otherwise ignore or misreport in environ (KEY=VALUE
// entries, as os.Environ returns): a DGTUNE_* variable that names no key is an error naming
// the nearest one, and a value that does not parse as its key's type is an error naming
// the variable. All problems are listed.
func checkEnv(environ []string) error {
	byName := map[string]key{}
	var names []string
	for _, k := range keys() {
		n := EnvName(k.path)
		byName[n] = k
		names = append(names, n)
	}
	sort.Strings(names)
	var problems []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix+"_") {
			continue
		}
		k, ok := byName[name]
		if !ok {
			msg := fmt.Sprintf("environment variable %s is not a setting", name)
			if s, ok := Suggest(name, names); ok {
				msg += fmt.Sprintf(" (did you mean %s?)", s)
			}
			problems = append(problems, msg)
			continue
		}
		if err := parseAs(k.typ, value); err != nil {
			problems = append(problems, fmt.Sprintf("%s=%q: %s %v", name, value, k.path, err))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("config: %s", strings.Join(problems, "; "))
	}
	return nil
}

// parseAs checks that s reads as a value of t the way the config decoder reads strings:
// numbers and booleans as Go parses them, lists comma-separated. An empty value is fine:
// viper treats an empty variable as unset.
func parseAs(t reflect.Type, s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		return nil
	case reflect.Bool:
		if _, err := strconv.ParseBool(s); err != nil {
			return fmt.Errorf("wants true or false")
		}
	case reflect.Int:
		if _, err := strconv.Atoi(s); err != nil {
			return fmt.Errorf("wants a whole number")
		}
	case reflect.Uint64:
		if _, err := strconv.ParseUint(s, 10, 64); err != nil {
			return fmt.Errorf("wants a non-negative whole number")
		}
	case reflect.Float64:
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return fmt.Errorf("wants a number")
		}
	case reflect.Slice:
		for i, part := range strings.Split(s, ",") {
			if err := parseAs(t.Elem(), part); err != nil {
				return fmt.Errorf("item %d %q: %v", i+1, strings.TrimSpace(part), err)
			}
		}
	}
	return nil
}
