package generate

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"

	"sigs.k8s.io/yaml"

	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// mimeBoundary separates the parts of generated AL2023 user data.
const mimeBoundary = "KARPENTER-MIGRATE"

// userDataFor decides the EC2NodeClass userData: nil when Karpenter's own
// bootstrap does everything the group's did; the group's custom commands
// (without its bootstrap call, which Karpenter makes) otherwise; and, where
// AL2 moves to AL2023, bootstrap arguments translated to a nodeadm NodeConfig.
func userDataFor(lt *inventory.LaunchTemplate, bs *inventory.Bootstrap, ami amiChoice, extraFlags []string, p *groupPlan) *string {
	if lt == nil {
		return nil
	}
	custom := bs != nil && bs.Custom
	if custom && lt.UserDataRedacted {
		p.warn("the launch template's user data runs custom commands but was redacted in the snapshot: re-run discover with user data included, or add userData to the EC2NodeClass by hand")
		custom = false
	}
	if custom && lt.UserData == "" {
		custom = false
	}
	switch ami.targetFamily {
	case karpv1.AMIFamilyAL2023:
		var script string
		if custom {
			if ami.sourceFamily == karpv1.AMIFamilyAL2023 {
				p.note("custom user data carried as is (Karpenter merges its NodeConfig with it)")
				return ptr(lt.UserData)
			}
			script = withoutBootstrap(shellScript(lt.UserData, p), p)
		}
		if script == "" && len(extraFlags) == 0 {
			return nil
		}
		if ami.sourceFamily != ami.targetFamily {
			p.note("AL2 user data translated to AL2023: bootstrap.sh arguments became a nodeadm NodeConfig; review the commands, which now run on AL2023 (dnf, not yum)")
		}
		ud, err := al2023UserData(extraFlags, script)
		if err != nil {
			p.warn("could not write AL2023 user data: %v", err)
			return nil
		}
		return &ud
	case karpv1.AMIFamilyAL2:
		if len(extraFlags) > 0 {
			p.warn("kubelet flags %s have no EC2NodeClass field and AL2 user data cannot pass them to Karpenter's bootstrap: not carried", strings.Join(extraFlags, " "))
		}
		if !custom {
			return nil
		}
		script := withoutBootstrap(shellScript(lt.UserData, p), p)
		if strings.TrimSpace(script) == "" {
			return nil
		}
		p.note("custom user data carried (Karpenter runs it before its own bootstrap)")
		return &script
	case karpv1.AMIFamilyCustom:
		return ptr(lt.UserData)
	default: // Bottlerocket, Windows
		if len(extraFlags) > 0 {
			p.warn("kubelet flags %s have no %s equivalent Karpenter passes: not carried", strings.Join(extraFlags, " "), ami.targetFamily)
		}
		if !custom {
			return nil
		}
		p.note("custom user data carried as is (Karpenter merges its settings with it)")
		return ptr(lt.UserData)
	}
}

// shellScript returns the shell parts of user data, which may be a MIME
// multi-part document or a plain script.
func shellScript(userData string, p *groupPlan) string {
	if !looksMIME(userData) {
		return userData
	}
	msg, err := mail.ReadMessage(strings.NewReader(userData))
	if err != nil {
		p.warn("user data looks like MIME but does not parse (%v): carried as a whole", err)
		return userData
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		body, _ := io.ReadAll(msg.Body)
		return string(body)
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var scripts []string
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			p.warn("user data MIME part does not parse (%v): later parts not carried", err)
			break
		}
		body, err := io.ReadAll(part)
		if err != nil {
			p.warn("user data MIME part cannot be read (%v): not carried", err)
			continue
		}
		ct, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if ct == "text/x-shellscript" || ct == "" {
			scripts = append(scripts, string(body))
		} else {
			p.warn("user data part of type %s was not carried: only shell scripts are", ct)
		}
	}
	return strings.Join(scripts, "\n")
}

func looksMIME(s string) bool {
	head := strings.ToLower(s[:min(len(s), 512)])
	return strings.HasPrefix(head, "mime-version:") || strings.HasPrefix(head, "content-type: multipart")
}

// withoutBootstrap removes the call to /etc/eks/bootstrap.sh (with its
// continuation lines): Karpenter bootstraps the node itself.
func withoutBootstrap(script string, p *groupPlan) string {
	var out []string
	removed := false
	continuing := false
	sc := bufio.NewScanner(strings.NewReader(script))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if continuing || strings.Contains(line, "/etc/eks/bootstrap.sh") {
			removed = true
			continuing = strings.HasSuffix(strings.TrimRight(line, " \t"), `\`)
			continue
		}
		out = append(out, line)
	}
	if removed {
		p.note("the user data's /etc/eks/bootstrap.sh call was removed: Karpenter bootstraps the node itself")
	}
	s := strings.Join(out, "\n")
	if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "#!/bin/bash")) == "" {
		return ""
	}
	return s + "\n"
}

// al2023UserData writes a MIME multi-part document with a nodeadm NodeConfig
// carrying kubelet flags and a shell script, either of which may be empty.
func al2023UserData(flags []string, script string) (string, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=%q\n\n", mimeBoundary)
	if len(flags) > 0 {
		nc := map[string]any{
			"apiVersion": "node.eks.aws/v1alpha1",
			"kind":       "NodeConfig",
			"spec":       map[string]any{"kubelet": map[string]any{"flags": flags}},
		}
		b, err := yaml.Marshal(nc)
		if err != nil {
			return "", fmt.Errorf("NodeConfig: %w", err)
		}
		fmt.Fprintf(&buf, "--%s\nContent-Type: application/node.eks.aws\n\n%s", mimeBoundary, b)
	}
	if script != "" {
		if !strings.HasPrefix(script, "#!") {
			script = "#!/bin/bash\n" + script
		}
		fmt.Fprintf(&buf, "--%s\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n%s", mimeBoundary, script)
		if !strings.HasSuffix(script, "\n") {
			buf.WriteByte('\n')
		}
	}
	fmt.Fprintf(&buf, "--%s--\n", mimeBoundary)
	return buf.String(), nil
}
