package generate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	karpv1 "github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1"
)

// BuildOverlay builds DIR/overlays/<env> with kustomize and returns the
// objects as a multi-document YAML stream, ready to apply.
func BuildOverlay(dir, env string) ([]byte, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", dir, err)
	}
	objs, err := buildOverlay(filesys.MakeFsOnDisk(), abs, env)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			out.WriteString("---\n")
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("overlay %s: render: %w", env, err)
		}
		out.Write(b)
	}
	return out.Bytes(), nil
}

// buildOverlay runs kustomize on one overlay and checks that every NodePool
// and EC2NodeClass it yields decodes strictly as Karpenter v1, so a typo in
// an edited file is caught here rather than by the API server.
func buildOverlay(fsys filesys.FileSystem, dir, env string) ([]map[string]any, error) {
	overlay := filepath.Join(dir, OverlaysDir, env)
	if !fsys.IsDir(overlay) {
		return nil, fmt.Errorf("overlay %s: %s is not a directory", env, overlay)
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(fsys, overlay)
	if err != nil {
		return nil, fmt.Errorf("overlay %s: kustomize build %s: %w", env, overlay, err)
	}
	var out []map[string]any
	for _, r := range rm.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, fmt.Errorf("overlay %s: %s: %w", env, r.CurId(), err)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("overlay %s: %s: %w", env, r.CurId(), err)
		}
		var target any
		switch r.GetKind() {
		case karpv1.NodePoolKind:
			target = &karpv1.NodePool{}
		case karpv1.EC2NodeClassKind:
			target = &karpv1.EC2NodeClass{}
		}
		if target != nil {
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(target); err != nil {
				return nil, fmt.Errorf("overlay %s: %s %s is not a valid Karpenter v1 object: %w", env, r.GetKind(), r.GetName(), err)
			}
		}
		out = append(out, m)
	}
	return out, nil
}
