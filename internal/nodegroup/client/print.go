package client

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksctl"
	"github.com/nodejoin/nodejoin/internal/printer"
)

// WriteIgnored lists the eksctl fields nodejoin does not use.
func (l *Loaded) WriteIgnored(w io.Writer) {
	if len(l.Ignored) == 0 {
		return
	}
	fmt.Fprintf(w, "%s of %s that nodejoin does not use:\n", printer.Plural(len(l.Ignored), "field"), l.Source)
	tw := printer.Table(w)
	fmt.Fprintln(tw, "  LINE\tFIELD\tVALUE\tWHY")
	for _, i := range l.Ignored {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", i.Line, i.Field, printer.Dash(clip(i.Value, 40)), i.Reason)
	}
	_ = tw.Flush()
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// WriteManifests prints groups as NodeGroup manifests: YAML documents, or one JSON
// list. withStatus keeps their status (get), which a new object (--dry-run) has not.
func WriteManifests(w io.Writer, format printer.Format, groups []v1alpha1.NodeGroup, withStatus bool) error {
	items := make([]map[string]any, len(groups))
	for i := range groups {
		ng := groups[i].DeepCopy()
		ng.APIVersion, ng.Kind = v1alpha1.GroupVersion.String(), v1alpha1.NodeGroupKind
		ng.ManagedFields = nil
		js, err := json.Marshal(ng)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(js, &items[i]); err != nil {
			return err
		}
		if !withStatus {
			delete(items[i], "status")
		}
	}
	if format == printer.JSON {
		return printer.Structured(w, format, map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	}
	for i := range items {
		data, err := yaml.Marshal(items[i])
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(w, "---")
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}

// GroupLine summarises a group's spec in one line.
func GroupLine(ng *v1alpha1.NodeGroup) string {
	s := ng.Spec.Scaling
	family := ng.Spec.Template.AMIFamily
	if family == "" {
		family = v1alpha1.AMIFamilyAmazonLinux2023
	}
	capacity := ng.Spec.Template.CapacityType
	if capacity == "" {
		capacity = v1alpha1.CapacityOnDemand
	}
	line := fmt.Sprintf("node group %s: %s (min %d, max %d) of %s, %s, %s", ng.Name,
		printer.Plural(int(DesiredSize(ng)), "node"), s.MinSize, s.MaxSize,
		strings.Join(InstanceTypes(ng), ","), family, capacity)
	if typ := ng.Labels[eksctl.LabelNodeGroupType]; typ != "" {
		line += " (eksctl " + typ + ")"
	}
	return line
}

// StateText is a group's status in a few words: phase and counts.
func StateText(ng *v1alpha1.NodeGroup) string {
	st := ng.Status
	phase := string(st.Phase)
	if phase == "" {
		phase = "PENDING"
	}
	want := DesiredSize(ng)
	s := fmt.Sprintf("%s, %d/%d Ready", phase, st.ReadySize, want)
	if n := len(st.Instances); n != int(want) {
		s += fmt.Sprintf(", %s", printer.Plural(n, "instance"))
	}
	if st.Update != nil || st.UpdatedSize != want {
		s += fmt.Sprintf(", %d/%d updated", st.UpdatedSize, want)
	}
	return s
}

func reachedText(goal Goal, ng *v1alpha1.NodeGroup) string {
	if ng == nil {
		return "deleted"
	}
	s := StateText(ng)
	if goal == Upgraded && ng.Status.LaunchTemplate != nil {
		s += ", launch template version " + ng.Status.LaunchTemplate.Version
	}
	return s
}

// Progress turns successive versions of a group into progress lines: what
// changed since the last version.
type Progress struct {
	last *v1alpha1.NodeGroup
	seen bool
}

// Lines returns what changed in cur, the group name's latest version (nil: gone).
//
//nolint:gocyclo // one independent comparison per reported change, read top to bottom.
func (p *Progress) Lines(name string, cur *v1alpha1.NodeGroup) []string {
	prev, first := p.last, !p.seen
	p.last, p.seen = cur, true
	if cur == nil {
		if first || prev == nil {
			return nil
		}
		return []string{fmt.Sprintf(" • %s: gone", name)}
	}
	var out []string
	if first || prev == nil || StateText(prev) != StateText(cur) {
		out = append(out, fmt.Sprintf(" • %s: %s", name, StateText(cur)))
	}
	var pu *v1alpha1.UpdateStatus
	if prev != nil {
		pu = prev.Status.Update
	}
	if u := cur.Status.Update; u != nil {
		if pu == nil || pu.Phase != u.Phase || pu.Message != u.Message {
			line := fmt.Sprintf(" • %s: update %s", name, u.Phase)
			if pu == nil {
				line += fmt.Sprintf(" (to launch template version %s, %s at a time, %s", u.TargetVersion, printer.Plural(int(u.MaxUnavailable), "node"), u.Strategy)
				if u.Surge > 0 {
					line += fmt.Sprintf(", surge %d", u.Surge)
				}
				line += ")"
			}
			if u.Message != "" {
				line += ": " + u.Message
			}
			out = append(out, line)
		}
		before := map[string]v1alpha1.UpdateNode{}
		if pu != nil {
			for _, n := range pu.Nodes {
				before[n.InstanceID] = n
			}
		}
		for _, n := range u.Nodes {
			b, ok := before[n.InstanceID]
			if ok && b.Step == n.Step && slices.Equal(b.Blocking, n.Blocking) {
				continue
			}
			line := fmt.Sprintf(" • %s: %s %s", name, nodeText(n.NodeName, n.InstanceID), n.Step)
			if len(n.Blocking) > 0 {
				line += " (eviction refused: " + strings.Join(n.Blocking, ", ") + ")"
			}
			out = append(out, line)
		}
	} else if pu != nil && !first {
		out = append(out, fmt.Sprintf(" • %s: update done", name))
	}
	known := map[string]bool{}
	if prev != nil {
		for _, is := range prev.Status.Health.Issues {
			known[issueText(is)] = true
		}
	}
	for _, is := range cur.Status.Health.Issues {
		if !known[issueText(is)] {
			out = append(out, fmt.Sprintf(" ! %s: %s", name, issueText(is)))
		}
	}
	return out
}

func nodeText(node, instance string) string {
	if node == "" {
		return instance
	}
	return node + " (" + instance + ")"
}

func issueText(is v1alpha1.Issue) string {
	s := string(is.Code) + ": " + is.Message
	if len(is.ResourceIDs) > 0 {
		s += " [" + strings.Join(is.ResourceIDs, ", ") + "]"
	}
	return s
}

// WriteTable prints the table of `get nodegroup`: eksctl get nodegroup's columns.
func WriteTable(w io.Writer, cluster string, groups []v1alpha1.NodeGroup) {
	if len(groups) == 0 {
		fmt.Fprintf(w, "Cluster %s has no node groups. Create one with: nodejoin create nodegroup --cluster %s -f nodegroup.yaml\n", cluster, cluster)
		return
	}
	tw := printer.Table(w)
	fmt.Fprintln(tw, "CLUSTER\tNODEGROUP\tSTATUS\tCREATED\tMIN SIZE\tMAX SIZE\tDESIRED CAPACITY\tINSTANCE TYPE\tIMAGE ID\tASG NAME\tTYPE")
	for i := range groups {
		ng := &groups[i]
		image := AMIType(ng)
		if image == "CUSTOM" {
			image = ng.Spec.Template.AMIID
		}
		typ := ng.Labels[eksctl.LabelNodeGroupType]
		if typ == "" {
			typ = eksctl.TypeManaged // every NodeGroup is managed by the controller
		}
		status := string(ng.Status.Phase)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", cluster, ng.Name, printer.Dash(status),
			ng.CreationTimestamp.UTC().Format(time.RFC3339), ng.Spec.Scaling.MinSize, ng.Spec.Scaling.MaxSize,
			DesiredSize(ng), strings.Join(InstanceTypes(ng), ","), image,
			printer.Dash(ng.Status.AutoScalingGroupName), typ)
	}
	_ = tw.Flush()
}

// ScalingChange says how a scale changes a group's sizes.
func ScalingChange(before, after v1alpha1.ScalingConfig) string {
	d := func(s v1alpha1.ScalingConfig) int32 {
		if s.DesiredSize != nil {
			return *s.DesiredSize
		}
		return s.MinSize
	}
	return fmt.Sprintf("%d → %d nodes (min %d → %d, max %d → %d)", d(before), d(after), before.MinSize, after.MinSize, before.MaxSize, after.MaxSize)
}

// awsTime is how the AWS CLI prints timestamps: 2022-09-14T09:54:36.211000+00:00.
const awsTime = "2006-01-02T15:04:05.000000-07:00"

// WriteText prints the description of ng as `describe nodegroup` does.
func (desc Description) WriteText(w io.Writer, ng *v1alpha1.NodeGroup) {
	d := desc.Nodegroup
	tw := printer.Table(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Node group", d.NodegroupName)
	row("ARN", d.NodegroupArn)
	row("Cluster", d.ClusterName)
	row("Status", d.Status)
	row("Created", d.CreatedAt.UTC().Format(awsTime))
	row("Modified", d.ModifiedAt.UTC().Format(awsTime))
	row("Scaling", fmt.Sprintf("desired %s, min %s, max %s", ptrText(d.ScalingConfig.DesiredSize), ptrText(d.ScalingConfig.MinSize), ptrText(d.ScalingConfig.MaxSize)))
	st := ng.Status
	row("Nodes", fmt.Sprintf("%d Ready, %d on the current version, %s", st.ReadySize, st.UpdatedSize, printer.Plural(len(st.Instances), "instance")))
	row("AMI family", fmt.Sprintf("%s (%s)", printer.Dash(string(ng.Spec.Template.AMIFamily)), d.AmiType))
	row("Release", printer.Dash(d.ReleaseVersion))
	row("Instance types", strings.Join(d.InstanceTypes, ", "))
	row("Capacity type", d.CapacityType)
	row("Labels", mapText(d.Labels))
	taints := make([]string, 0, len(ng.Spec.Template.Taints))
	for _, t := range ng.Spec.Template.Taints {
		taints = append(taints, t.ToString())
	}
	row("Taints", printer.Dash(strings.Join(taints, ", ")))
	upd := "maxUnavailable " + printer.Dash(ptrText(d.UpdateConfig.MaxUnavailable))
	if d.UpdateConfig.MaxUnavailablePercentage != nil {
		upd = "maxUnavailablePercentage " + ptrText(d.UpdateConfig.MaxUnavailablePercentage)
	}
	row("Update config", upd+", strategy "+d.UpdateConfig.UpdateStrategy)
	lt := "-"
	if d.LaunchTemplate != nil {
		lt = fmt.Sprintf("%s (%s) version %s", d.LaunchTemplate.Name, d.LaunchTemplate.ID, d.LaunchTemplate.Version)
	}
	row("Launch template", lt)
	asg := "-"
	if len(d.Resources.AutoScalingGroups) > 0 {
		asg = d.Resources.AutoScalingGroups[0].Name
	}
	row("Auto Scaling group", asg)
	_ = tw.Flush()
	if u := st.Update; u != nil {
		fmt.Fprintf(w, "Update: %s to launch template version %s (%s, %s at a time, %d replaced)", u.Phase, u.TargetVersion, u.Strategy, printer.Plural(int(u.MaxUnavailable), "node"), u.Replaced)
		if u.Message != "" {
			fmt.Fprintf(w, ": %s", u.Message)
		}
		fmt.Fprintln(w)
		for _, n := range u.Nodes {
			fmt.Fprintf(w, "  %s %s", nodeText(n.NodeName, n.InstanceID), n.Step)
			if len(n.Blocking) > 0 {
				fmt.Fprintf(w, " (eviction refused: %s)", strings.Join(n.Blocking, ", "))
			}
			fmt.Fprintln(w)
		}
	}
	if len(st.Instances) > 0 {
		fmt.Fprintln(w, "Instances:")
		tw = printer.Table(w)
		fmt.Fprintln(tw, "  INSTANCE\tZONE\tVERSION\tSTATE\tNODE\tREADY")
		for _, in := range st.Instances {
			ready := "no"
			if in.Ready {
				ready = "yes"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", in.InstanceID, printer.Dash(in.AvailabilityZone), printer.Dash(in.LaunchTemplateVersion), printer.Dash(in.LifecycleState), printer.Dash(in.NodeName), ready)
		}
		_ = tw.Flush()
	}
	if len(st.Health.Issues) == 0 {
		fmt.Fprintln(w, "Health: no issues")
		return
	}
	fmt.Fprintln(w, "Health issues:")
	for _, is := range st.Health.Issues {
		fmt.Fprintf(w, "  %s\n", issueText(is))
	}
}

func mapText(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ", ")
}

func ptrText(p *int32) string {
	if p == nil {
		return ""
	}
	return fmt.Sprint(*p)
}

// WriteSummary ends a long operation: the groups' table and a sentence, or the groups
// as describe-nodegroup objects with -o json|yaml. account is asked only for those.
func WriteSummary(w io.Writer, format printer.Format, cluster string, account func() Account, groups []v1alpha1.NodeGroup, sentence string) error {
	if format != printer.Text {
		acct := account()
		ds := make([]Description, len(groups))
		for i := range groups {
			ds[i] = Describe(&groups[i], acct)
		}
		return printer.Structured(w, format, ds)
	}
	WriteTable(w, cluster, groups)
	_, err := fmt.Fprintln(w, sentence)
	return err
}
