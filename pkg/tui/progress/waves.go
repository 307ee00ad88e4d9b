package progress

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/table"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/plan"
)

// Waves is a plan's waves as a table: the legacy nodes each drains, its
// pods, the NodePools that receive them, the nodes Karpenter is predicted
// to launch, the placeholders pre-provisioned ahead of the drain and the
// wave's predicted duration (plan.Timing).
func Waves(p *plan.Plan) table.Model {
	rows := make([]table.Row, len(p.Waves))
	for i, w := range p.Waves {
		rows[i] = table.Row{fmt.Sprint(w.Index), fmt.Sprint(len(w.Nodes)), fmt.Sprint(w.Pods), strings.Join(w.NodePools, ","), fmt.Sprint(len(w.PredictedNodes)), fmt.Sprint(len(w.PreProvision)), plan.Seconds(w.PredictedSeconds)}
	}
	return table.New(table.WithColumns(waveColumns), table.WithRows(rows))
}

var waveColumns = []table.Column{
	{Title: "WAVE", Width: 4}, {Title: "NODES", Width: 5}, {Title: "PODS", Width: 4}, {Title: "NODEPOOLS", Width: 28},
	{Title: "NEW NODES", Width: 9}, {Title: "WARM", Width: 4}, {Title: "TIME", Width: 7},
}
