// Plays Argo CD's notifications controller with the real github.com/argoproj/notifications-engine:
// parses our argocd-notifications-cm snippet (plus any example files), and for each Application read
// from stdin (one JSON object per line, in order, as the controller would see successive states)
// runs the trigger, keeps the controller's "already notified" state (oncePer), renders the template
// and, when -send is set, delivers it with the engine's own webhook service.
//
// Each input line yields one JSON line on stdout: what triggered, the oncePer value, the global
// subscriptions' destinations for the app's labels, the rendered body, and the delivery error if any.
// Used by test/argocd/notifications.test.ts; not part of the shipped service.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/argoproj/notifications-engine/pkg/api"
	"github.com/argoproj/notifications-engine/pkg/controller"
	"github.com/argoproj/notifications-engine/pkg/services"
	"github.com/argoproj/notifications-engine/pkg/templates"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

type result struct {
	Triggered    bool              `json:"triggered"`
	OncePer      string            `json:"oncePer,omitempty"`
	AlreadySent  bool              `json:"alreadySent,omitempty"`
	Destinations []string          `json:"destinations"`
	Bodies       map[string]string `json:"bodies,omitempty"`
	Sent         bool              `json:"sent"`
	Error        string            `json:"error,omitempty"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "notify: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	var cmFiles files
	flag.Var(&cmFiles, "cm", "ConfigMap YAML whose data is merged into argocd-notifications-cm (repeatable)")
	token := flag.String("token", "", "value of the gitops-reloader-token key in argocd-notifications-secret")
	url := flag.String("url", "", "replace the url of every webhook service with this one")
	trigger := flag.String("trigger", "on-sync-ended-gitops-reloader", "trigger to run")
	send := flag.Bool("send", false, "deliver the notification with the engine's webhook service")
	flag.Parse()

	cm := &corev1.ConfigMap{Data: map[string]string{}}
	for _, f := range cmFiles {
		raw, err := os.ReadFile(f)
		if err != nil {
			fail("%v", err)
		}
		var part corev1.ConfigMap
		if err := yaml.Unmarshal(raw, &part); err != nil {
			fail("%s: %v", f, err)
		}
		for k, v := range part.Data {
			cm.Data[k] = v
		}
	}
	if *url != "" {
		for k, v := range cm.Data {
			if !strings.HasPrefix(k, "service.webhook.") {
				continue
			}
			var opts map[string]any
			if err := yaml.Unmarshal([]byte(v), &opts); err != nil {
				fail("%s: %v", k, err)
			}
			opts["url"] = *url
			out, err := yaml.Marshal(opts)
			if err != nil {
				fail("%v", err)
			}
			cm.Data[k] = string(out)
		}
	}
	secret := &corev1.Secret{Data: map[string][]byte{"gitops-reloader-token": []byte(*token)}}
	cfg, err := api.ParseConfig(cm, secret)
	if err != nil {
		fail("parse config: %v", err)
	}
	getVars := func(obj map[string]any, _ services.Destination) map[string]any { return map[string]any{"app": obj} }
	notifier, err := api.NewAPI(*cfg, getVars)
	if err != nil {
		fail("new api: %v", err)
	}
	tmpl, err := templates.NewService(cfg.Templates)
	if err != nil {
		fail("templates: %v", err)
	}

	state := controller.NotificationsState{}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 16<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		var app map[string]any
		if err := json.Unmarshal([]byte(line), &app); err != nil {
			fail("input: %v", err)
		}
		var labels map[string]string
		if meta, ok := app["metadata"].(map[string]any); ok {
			if l, ok := meta["labels"].(map[string]any); ok {
				labels = map[string]string{}
				for k, v := range l {
					labels[k] = fmt.Sprint(v)
				}
			}
		}
		r := result{Destinations: []string{}}
		for _, d := range cfg.GetGlobalDestinations(labels)[*trigger] {
			r.Destinations = append(r.Destinations, d.Service)
		}
		dest := services.Destination{Service: "gitops-reloader"}
		conds, err := notifier.RunTrigger(*trigger, app)
		if err != nil {
			fail("trigger: %v", err)
		}
		for _, c := range conds {
			if !c.Triggered {
				state.SetAlreadyNotified(false, "", *trigger, c, dest, false)
				continue
			}
			r.Triggered = true
			r.OncePer = c.OncePer
			n, err := tmpl.FormatNotification(map[string]any{"app": app}, c.Templates...)
			if err != nil {
				r.Error = err.Error()
				continue
			}
			r.Bodies = map[string]string{}
			for svc, w := range n.Webhook {
				r.Bodies[svc] = w.Body
			}
			if !state.SetAlreadyNotified(false, "", *trigger, c, dest, true) {
				r.AlreadySent = true
				continue
			}
			if *send {
				if err := notifier.Send(app, c.Templates, dest); err != nil {
					r.Error = err.Error()
				} else {
					r.Sent = true
				}
			}
		}
		if err := out.Encode(r); err != nil {
			fail("%v", err)
		}
	}
	if err := in.Err(); err != nil {
		fail("input: %v", err)
	}
}
