package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
)

// formatsAnnotation lists, comma-separated, the -o formats a command
// writes, the first its default; a command without it has no -o.
const formatsAnnotation = "karpenter-migrate.io/output-formats"

// writes is the annotation of a command whose -o takes formats, the
// first its default.
func writes(formats ...string) map[string]string {
	return map[string]string{formatsAnnotation: strings.Join(formats, ",")}
}

// usageError marks err as a command line that could not be used (exit 2).
func usageError(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// withHelp is a usage error of the command at path that points to its
// --help.
type withHelp struct {
	err  error
	path string
}

func (e withHelp) Error() string { return fmt.Sprintf("%v\nRun '%s --help' for usage.", e.err, e.path) }
func (e withHelp) Unwrap() error { return e.err }

// usageErrorOf is usageError pointing to c's --help.
func usageErrorOf(c *cobra.Command, err error) error {
	return usageError(withHelp{err: err, path: c.CommandPath()})
}

// strictCommandLine makes every mistake on the command line a usage error
// (exit 2) that says what was meant: an unknown command or subcommand, an
// unknown flag (with the nearest one), a flag's value of the wrong kind,
// the wrong arguments. Without it cobra prints a command group's help
// and exits 0 for "iam destroy".
func strictCommandLine(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.SetFlagErrorFunc(flagError)
	for _, h := range root.Commands() {
		if h.Name() == "help" {
			// "help nosuch" is the same mistake as "nosuch": cobra's help
			// printed the root's help for it and exited 0.
			h.Args = func(_ *cobra.Command, args []string) error {
				c, rest, err := root.Find(args)
				if err != nil || len(rest) == 0 {
					return err
				}
				return unknownSubcommand(c, rest)
			}
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && !c.Runnable() {
			c.Args = unknownSubcommand
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		}
		if args := c.Args; args != nil {
			c.Args = func(c *cobra.Command, a []string) error {
				if err := args(c, a); err != nil {
					var exit *ExitError
					if errors.As(err, &exit) {
						return err
					}
					return usageErrorOf(c, err)
				}
				return nil
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// unknownSubcommand refuses any argument to a command group (or the
// root): it can only be a mistyped subcommand.
func unknownSubcommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var names []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	if n := config.Nearest(args[0], names); n != "" {
		msg += fmt.Sprintf("; did you mean %q?", c.CommandPath()+" "+n)
	}
	return usageErrorOf(c, fmt.Errorf("%s\n%s has: %s", msg, c.CommandPath(), strings.Join(names, ", ")))
}

// flagError rewrites pflag's parse errors: an unknown flag names the
// nearest one, a value of the wrong kind says what the flag takes.
func flagError(c *cobra.Command, err error) error {
	// "iam destroy --cluster x": the group, not its flags, is what is wrong.
	if c.HasSubCommands() && len(c.Flags().Args()) > 0 {
		return unknownSubcommand(c, c.Flags().Args())
	}
	var unknown *pflag.NotExistError
	var invalid *pflag.InvalidValueError
	switch {
	case errors.As(err, &unknown) && unknown.GetSpecifiedName() != "":
		var names []string
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		msg := fmt.Sprintf("unknown flag --%s for %q", unknown.GetSpecifiedName(), c.CommandPath())
		if n := config.Nearest(unknown.GetSpecifiedName(), names); n != "" {
			msg += fmt.Sprintf("; did you mean --%s?", n)
		}
		err = errors.New(msg)
	case errors.As(err, &invalid):
		f := invalid.GetFlag()
		err = fmt.Errorf("--%s %q: want %s", f.Name, invalid.GetValue(), flagValueWords(f))
	}
	return usageErrorOf(c, err)
}

// flagValueWords says what a flag of f's type takes.
func flagValueWords(f *pflag.Flag) string {
	switch t := f.Value.Type(); {
	case strings.HasPrefix(t, "uint"):
		return "a whole number, 0 or more"
	case strings.HasPrefix(t, "int"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "duration":
		return "a duration such as 90s, 15m or 1h30m"
	default:
		return "a " + t
	}
}

// checkOutput refuses an -o the command does not write, naming the
// formats it has, and returns the format to write (the command's default
// when -o was not given).
func checkOutput(c *cobra.Command, output string) (string, error) {
	formats := strings.Split(c.Annotations[formatsAnnotation], ",")
	given := c.Flags().Changed("output")
	switch {
	case formats[0] == "" && given:
		return "", usageError(fmt.Errorf("-o/--output does not apply to %q: it has one output%s", c.CommandPath(), noOutputHint(c)))
	case formats[0] == "":
		return "", nil
	case !given:
		return formats[0], nil
	}
	for _, f := range formats {
		if output == f {
			return output, nil
		}
	}
	return "", usageError(fmt.Errorf("-o/--output %q: %s writes %s", output, c.CommandPath(), orList(formats)))
}

// noOutputHint says where the machine-readable output of a command
// without -o is.
func noOutputHint(c *cobra.Command) string {
	switch c.Name() {
	case "apply", "rollback":
		return "; --log-format json prints its progress as one JSON event per line, and status -o json its journal"
	case "init":
		return ", the file it writes"
	}
	return ""
}

// orList is "a", "a or b", "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
