package discover

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/kballard/go-shellquote"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/inventory"
)

// DecodeUserData turns launch-template user data (base64, as EC2 returns
// it) into text; text that is not base64 is returned as is.
func DecodeUserData(s string) string {
	if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s)); err == nil {
		return string(b)
	}
	return s
}

// ParseUserData reads the bootstrap settings from decoded user data: AL2's
// /etc/eks/bootstrap.sh arguments, AL2023's nodeadm NodeConfig (alone or in
// a MIME multipart document) or Bottlerocket's TOML settings. It never
// fails: unreadable user data gives Format unknown and Custom true, so that
// generate carries it over verbatim.
func ParseUserData(text string) *inventory.Bootstrap {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	if parts, ok := mimeParts(text); ok {
		b := &inventory.Bootstrap{Format: inventory.BootstrapUnknown}
		found := false
		for _, p := range parts {
			if strings.Contains(p.contentType, "nodeadm") || strings.Contains(p.body, "kind: NodeConfig") {
				if nb := parseNodeConfig(p.body); nb != nil {
					b, found = nb, true
				}
			}
		}
		for _, p := range parts {
			if !strings.Contains(p.contentType, "nodeadm") && !strings.Contains(p.body, "kind: NodeConfig") {
				if found {
					b.Custom = true // extra scripts beside the NodeConfig
				} else if sb := parseBootstrapSh(p.body); sb != nil {
					return sb
				}
			}
		}
		if !found {
			b.Custom = true
		}
		return b
	}
	if strings.Contains(text, "kind: NodeConfig") {
		if b := parseNodeConfig(text); b != nil {
			return b
		}
	}
	if b := parseBootstrapSh(text); b != nil {
		return b
	}
	if strings.Contains(text, "[settings") {
		if b := parseBottlerocket(text); b != nil {
			return b
		}
	}
	return &inventory.Bootstrap{Format: inventory.BootstrapUnknown, Custom: true}
}

type mimePart struct{ contentType, body string }

// mimeParts splits a MIME multipart document (the format EKS managed node
// groups merge user data into).
func mimeParts(text string) ([]mimePart, bool) {
	if !strings.HasPrefix(text, "MIME-Version") && !strings.HasPrefix(text, "Content-Type") {
		return nil, false
	}
	msg, err := mail.ReadMessage(strings.NewReader(text + "\n"))
	if err != nil {
		return nil, false
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "multipart/") || params["boundary"] == "" {
		return nil, false
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var out []mimePart
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, len(out) > 0
		}
		body, err := io.ReadAll(io.LimitReader(p, 1<<20))
		if err != nil {
			return out, len(out) > 0
		}
		out = append(out, mimePart{contentType: p.Header.Get("Content-Type"), body: string(body)})
	}
	return out, true
}

// parseBootstrapSh finds the /etc/eks/bootstrap.sh call in an AL2 script.
func parseBootstrapSh(script string) *inventory.Bootstrap {
	var call string
	other := false
	sc := bufio.NewScanner(strings.NewReader(joinContinuations(script)))
	sc.Buffer(make([]byte, 0, 4<<10), 1<<20) // grows only for long lines
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || line == "set -ex" || line == "set -e" || line == "set -o xtrace":
		case strings.Contains(line, "/etc/eks/bootstrap.sh") && call == "":
			call = line[strings.Index(line, "/etc/eks/bootstrap.sh"):]
		default:
			other = true
		}
	}
	if call == "" {
		return nil
	}
	b := &inventory.Bootstrap{Format: inventory.BootstrapAL2, Custom: other}
	args, err := shellquote.Split(call)
	if err != nil {
		b.Custom = true
		return b
	}
	for i := 1; i < len(args); i++ {
		name, value, hasValue := strings.Cut(args[i], "=")
		next := func() string {
			if hasValue {
				return value
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch name {
		case "--kubelet-extra-args":
			applyKubeletArgs(b, next())
		case "--dns-cluster-ip":
			b.ClusterDNS = []string{next()}
		case "--use-max-pods", "--b64-cluster-ca", "--apiserver-endpoint", "--container-runtime", "--ip-family", "--service-ipv6-cidr":
			next() // cluster wiring Karpenter supplies itself
		default:
			// Other bootstrap.sh options (docker bridge, pause image, ...)
			// have no Karpenter equivalent; skip their value. A bare word
			// is the cluster name.
			if strings.HasPrefix(name, "--") && !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
				i++
			}
		}
	}
	return b
}

func joinContinuations(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\\\r\n", " "), "\\\n", " ")
}

// applyKubeletArgs reads kubelet flags (from --kubelet-extra-args).
func applyKubeletArgs(b *inventory.Bootstrap, s string) {
	args, err := shellquote.Split(s)
	if err != nil {
		b.ExtraArgs = append(b.ExtraArgs, s)
		return
	}
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(args[i], "=")
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			i++
			value = args[i]
		}
		switch name {
		case "--node-labels":
			b.NodeLabels = merge(b.NodeLabels, keyValues(value, ","))
		case "--register-with-taints":
			b.Taints = append(b.Taints, parseTaints(value)...)
		case "--max-pods":
			if n, err := strconv.ParseInt(value, 10, 32); err == nil {
				v := int32(n)
				b.MaxPods = &v
			}
		case "--kube-reserved":
			b.KubeReserved = merge(b.KubeReserved, keyValues(value, ","))
		case "--system-reserved":
			b.SystemReserved = merge(b.SystemReserved, keyValues(value, ","))
		case "--eviction-hard":
			b.EvictionHard = merge(b.EvictionHard, evictionValues(value))
		case "--eviction-soft":
			b.EvictionSoft = merge(b.EvictionSoft, evictionValues(value))
		default:
			if hasValue || value != "" {
				b.ExtraArgs = append(b.ExtraArgs, name+"="+value)
			} else {
				b.ExtraArgs = append(b.ExtraArgs, name)
			}
		}
	}
}

// keyValues parses "a=1,b=2".
func keyValues(s, sep string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, sep) {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if ok && k != "" {
			out[k] = v
		}
	}
	return out
}

// evictionValues parses "memory.available<100Mi,nodefs.available<10%".
func evictionValues(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "<")
		if ok && k != "" {
			out[k] = v
		}
	}
	return out
}

// parseTaints parses kubelet's "key=value:Effect,key2:Effect".
func parseTaints(s string) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		kv, effect, ok := strings.Cut(t, ":")
		if !ok || kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
	}
	return out
}

func merge(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = map[string]string{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

// nodeConfig is the part of nodeadm's NodeConfig (node.eks.aws/v1alpha1)
// that carries kubelet settings.
type nodeConfig struct {
	Kind string `json:"kind"`
	Spec struct {
		Kubelet struct {
			Config map[string]any `json:"config"`
			Flags  []string       `json:"flags"`
		} `json:"kubelet"`
	} `json:"spec"`
}

func parseNodeConfig(doc string) *inventory.Bootstrap {
	var nc nodeConfig
	if err := yaml.Unmarshal([]byte(doc), &nc); err != nil || nc.Kind != "NodeConfig" {
		return nil
	}
	b := &inventory.Bootstrap{Format: inventory.BootstrapNodeadm}
	cfg := nc.Spec.Kubelet.Config
	if v, ok := cfg["maxPods"].(float64); ok {
		n := int32(v)
		b.MaxPods = &n
	}
	b.KubeReserved = stringMap(cfg["kubeReserved"])
	b.SystemReserved = stringMap(cfg["systemReserved"])
	b.EvictionHard = stringMap(cfg["evictionHard"])
	b.EvictionSoft = stringMap(cfg["evictionSoft"])
	if dns, ok := cfg["clusterDNS"].([]any); ok {
		for _, d := range dns {
			b.ClusterDNS = append(b.ClusterDNS, fmt.Sprint(d))
		}
	}
	if taints, ok := cfg["registerWithTaints"].([]any); ok {
		for _, t := range taints {
			if m, ok := t.(map[string]any); ok {
				b.Taints = append(b.Taints, corev1.Taint{Key: fmt.Sprint(m["key"]), Value: str(m["value"]), Effect: corev1.TaintEffect(str(m["effect"]))})
			}
		}
	}
	known := map[string]bool{"maxPods": true, "kubeReserved": true, "systemReserved": true, "evictionHard": true, "evictionSoft": true, "clusterDNS": true, "registerWithTaints": true}
	var rest []string
	for k, v := range cfg {
		if !known[k] {
			rest = append(rest, fmt.Sprintf("config.%s=%v", k, v))
		}
	}
	sort.Strings(rest)
	applyKubeletArgs(b, strings.Join(nc.Spec.Kubelet.Flags, " "))
	b.ExtraArgs = append(b.ExtraArgs, rest...)
	return b
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func stringMap(v any) map[string]string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		out[k] = fmt.Sprint(x)
	}
	return out
}

// bottlerocket is the part of Bottlerocket's settings that matters here.
type bottlerocket struct {
	Settings struct {
		Kubernetes struct {
			MaxPods        *int32            `toml:"max-pods"`
			NodeLabels     map[string]string `toml:"node-labels"`
			NodeTaints     map[string]any    `toml:"node-taints"`
			KubeReserved   map[string]string `toml:"kube-reserved"`
			SystemReserved map[string]string `toml:"system-reserved"`
			EvictionHard   map[string]string `toml:"eviction-hard"`
			EvictionSoft   map[string]string `toml:"eviction-soft"`
			ClusterDNSIP   any               `toml:"cluster-dns-ip"`
		} `toml:"kubernetes"`
	} `toml:"settings"`
}

func parseBottlerocket(text string) *inventory.Bootstrap {
	var br bottlerocket
	md, err := toml.NewDecoder(bytes.NewReader([]byte(text))).Decode(&br)
	if err != nil {
		return nil
	}
	k := br.Settings.Kubernetes
	b := &inventory.Bootstrap{Format: inventory.BootstrapBottlerocket, MaxPods: k.MaxPods,
		NodeLabels: k.NodeLabels, KubeReserved: k.KubeReserved, SystemReserved: k.SystemReserved,
		EvictionHard: k.EvictionHard, EvictionSoft: k.EvictionSoft}
	keys := make([]string, 0, len(k.NodeTaints))
	for key := range k.NodeTaints {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		// "key" = "value:Effect" or ["value:Effect", ...]
		var vals []string
		switch v := k.NodeTaints[key].(type) {
		case string:
			vals = []string{v}
		case []any:
			for _, x := range v {
				vals = append(vals, fmt.Sprint(x))
			}
		}
		for _, ve := range vals {
			value, effect, _ := strings.Cut(ve, ":")
			b.Taints = append(b.Taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
		}
	}
	switch v := k.ClusterDNSIP.(type) {
	case string:
		b.ClusterDNS = []string{v}
	case []any:
		for _, x := range v {
			b.ClusterDNS = append(b.ClusterDNS, fmt.Sprint(x))
		}
	}
	for _, u := range md.Undecoded() {
		if len(u) > 1 && u[0] == "settings" && u[1] != "kubernetes" {
			b.Custom = true // other settings (host containers, bootstrap containers, ...)
		}
	}
	return b
}
