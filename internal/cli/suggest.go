package cli

import "github.com/spf13/cobra"

// SuggestFlags makes an unknown flag's error suggest the nearest flag of cmd, for commands
// that take no config file (AddConfigFlags does this for those that do).
func SuggestFlags(cmd *cobra.Command) { cmd.SetFlagErrorFunc(suggestFlag) }
