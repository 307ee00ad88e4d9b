// Package overlays embeds the environment profiles (dev, staging, prod) that
// `karpenter-migrate generate` turns into kustomize overlays: each profile is
// a directory holding profile.yaml (the settings) and *.yaml.tmpl patch
// templates. See README.md for the format.
package overlays

import "embed"

// FS holds one directory per profile. It lives here, at the repository's top
// level, because go:embed cannot reach parent directories from pkg/.
//
//go:embed */profile.yaml */*.yaml.tmpl
var FS embed.FS
