// Captures what notification-controller v1.9.0 really forwards to a `generic` and a `generic-hmac`
// Provider: it is dropped into a copy of the module's internal/server package by capture.sh and runs
// the controller's own event server (eventMiddleware + handleEvent, with Alert, Provider and Secret
// in a fake client) against events shaped as kustomize-controller v1.9.0 and helm-controller v1.6.0
// emit them. Every forwarded request (headers and exact body bytes) is written to $CAPTURE_OUT, the
// fixture service/flux/*.test.ts read. Not part of this repository's Go build.
package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/fluxcd/pkg/apis/meta"

	apiv1 "github.com/fluxcd/notification-controller/api/v1"
	apiv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
)

type captured struct {
	Name    string            `json:"name"`
	Path    string            `json:"path"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

func TestCaptureForwarded(t *testing.T) {
	out := os.Getenv("CAPTURE_OUT")
	if out == "" {
		t.Fatal("CAPTURE_OUT is not set")
	}
	const ns = "flux-system"

	var mu sync.Mutex
	var got []captured
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h := map[string]string{}
		for _, k := range []string{"Content-Type", "X-Signature", "Gotk-Component", "Authorization", "Content-Encoding", "User-Agent"} {
			if v := r.Header.Get(k); v != "" {
				h[k] = v
			}
		}
		mu.Lock()
		got = append(got, captured{Path: r.URL.Path, Method: r.Method, Headers: h, Body: string(b)})
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer rcv.Close()

	secret := func(name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	provider := func(name, typ, path, secretName string) *apiv1beta3.Provider {
		return &apiv1beta3.Provider{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: apiv1beta3.ProviderSpec{
				Type:      typ,
				Address:   rcv.URL + path,
				SecretRef: &meta.LocalObjectReference{Name: secretName},
			},
		}
	}
	alert := func(providerName string) *apiv1beta3.Alert {
		return &apiv1beta3.Alert{
			ObjectMeta: metav1.ObjectMeta{Name: "reloader-" + providerName, Namespace: ns},
			Spec: apiv1beta3.AlertSpec{
				ProviderRef:   meta.LocalObjectReference{Name: providerName},
				EventSeverity: "info",
				EventSources: []apiv1.CrossNamespaceObjectReference{
					{Kind: "Kustomization", Name: "*"},
					{Kind: "HelmRelease", Name: "*", Namespace: "team-a"},
					{Kind: "GitRepository", Name: "*"},
				},
			},
		}
	}

	scheme := runtime.NewScheme()
	if err := apiv1beta3.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kclient := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(
		// generic-hmac: the HMAC key is the Secret's `token`.
		secret("hmac-token", map[string]string{"token": "6f1d2c3b4a59687766554433221100ff"}),
		provider("hmac", "generic-hmac", "/hmac", "hmac-token"),
		alert("hmac"),
		// The same with a token that ends in a newline (a Secret made with --from-file).
		secret("hmac-token-nl", map[string]string{"token": "6f1d2c3b4a59687766554433221100ff\n"}),
		provider("hmac-nl", "generic-hmac", "/hmac-nl", "hmac-token-nl"),
		alert("hmac-nl"),
		// generic with an Authorization header from the Secret's `headers`.
		secret("bearer-headers", map[string]string{"headers": "Authorization: Bearer 6f1d2c3b4a59687766554433221100ff\n"}),
		provider("bearer", "generic", "/bearer", "bearer-headers"),
		alert("bearer"),
	).Build()

	s := NewEventServer("", log.Log, kclient, record.NewFakeRecorder(64), false, false, nil)
	srv := httptest.NewServer(s.eventMiddleware(http.HandlerFunc(s.handleEvent())))
	defer srv.Close()

	at := metav1.NewTime(time.Date(2026, 12, 4, 22, 41, 7, 0, time.UTC))
	ks := corev1.ObjectReference{Kind: "Kustomization", Namespace: ns, Name: "apps",
		UID: "5a0b6c1e-2f3d-4e5a-9b8c-7d6e5f4a3b2c", APIVersion: "kustomize.toolkit.fluxcd.io/v1", ResourceVersion: "48213"}
	hr := corev1.ObjectReference{Kind: "HelmRelease", Namespace: "team-a", Name: "web",
		UID: "0c9d8e7f-6a5b-4c3d-2e1f-0a9b8c7d6e5f", APIVersion: "helm.toolkit.fluxcd.io/v2", ResourceVersion: "51007"}
	gr := corev1.ObjectReference{Kind: "GitRepository", Namespace: ns, Name: "flux-system",
		UID: "1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e", APIVersion: "source.toolkit.fluxcd.io/v1", ResourceVersion: "47001"}
	const rev = "main@sha1:3c1f0e2d9b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d"
	const originRev = "v1.4.2@sha1:9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d"

	events := []struct {
		name string
		e    eventv1.Event
	}{
		{"kustomization-apply", eventv1.Event{
			InvolvedObject: ks, Severity: "info", Timestamp: at, Reason: "Progressing",
			// kustomize-controller apply(): one ChangeSetEntry.String() per changed object.
			Message: "ConfigMap/apps/web-config configured\n" +
				"ConfigMap/apps/worker-config configured\n" +
				"Secret/apps/db-credentials configured\n" +
				"Namespace/team-b created\n" +
				"ClusterRole/system:reloader-view created\n" +
				"Deployment/apps/web configured",
			Metadata: map[string]string{
				"kustomize.toolkit.fluxcd.io/revision":       rev,
				"kustomize.toolkit.fluxcd.io/originRevision": originRev,
				// An object annotation the recorder copies; checksum/digest are dropped by cleanupMetadata.
				"kustomize.toolkit.fluxcd.io/digest": "sha256:aa",
			},
			ReportingController: "kustomize-controller", ReportingInstance: "kustomize-controller-6d9c7b5f4-x2x7q",
		}},
		{"kustomization-prune", eventv1.Event{
			InvolvedObject: ks, Severity: "info", Timestamp: at, Reason: "Progressing",
			Message:             "ConfigMap/apps/old-config deleted\nSecret/apps/old-token deleted",
			Metadata:            map[string]string{"kustomize.toolkit.fluxcd.io/revision": rev},
			ReportingController: "kustomize-controller", ReportingInstance: "kustomize-controller-6d9c7b5f4-x2x7q",
		}},
		{"kustomization-failed", eventv1.Event{
			InvolvedObject: ks, Severity: "error", Timestamp: at, Reason: "ReconciliationFailed",
			Message: "ConfigMap/apps/broken dry-run failed (Invalid): ConfigMap \"broken\" is invalid: data[bad key]: " +
				"Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' " +
				"(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+') <nil> & more\n" +
				"ConfigMap/apps/web-config configured",
			Metadata:            map[string]string{"kustomize.toolkit.fluxcd.io/revision": rev},
			ReportingController: "kustomize-controller", ReportingInstance: "kustomize-controller-6d9c7b5f4-x2x7q",
		}},
		{"kustomization-finished", eventv1.Event{
			InvolvedObject: ks, Severity: "info", Timestamp: at, Reason: "ReconciliationSucceeded",
			Message: "Reconciliation finished in 1.204s, next run in 10m0s",
			Metadata: map[string]string{
				"kustomize.toolkit.fluxcd.io/revision":      rev,
				"kustomize.toolkit.fluxcd.io/commit_status": "update",
			},
			ReportingController: "kustomize-controller", ReportingInstance: "kustomize-controller-6d9c7b5f4-x2x7q",
		}},
		{"helmrelease-upgrade", eventv1.Event{
			InvolvedObject: hr, Severity: "info", Timestamp: at, Reason: "UpgradeSucceeded",
			Message: "Helm upgrade succeeded for release team-a/web.v4 with chart web@1.7.0",
			// helm-controller reconcile.eventMeta: revision (chart version), token (config digest),
			// app-version, oci-digest.
			Metadata: map[string]string{
				"helm.toolkit.fluxcd.io/revision":    "1.7.0",
				"helm.toolkit.fluxcd.io/token":       "sha256:5d41402abc4b2a76b9719d911017c592",
				"helm.toolkit.fluxcd.io/app-version": "2.3.1",
			},
			ReportingController: "helm-controller", ReportingInstance: "helm-controller-7f8b9c6d5-q9w8e",
		}},
		{"gitrepository-stored", eventv1.Event{
			InvolvedObject: gr, Severity: "info", Timestamp: at, Reason: "NewArtifact",
			Message:             "stored artifact for commit 'Change the web config'",
			Metadata:            map[string]string{"source.toolkit.fluxcd.io/revision": rev},
			ReportingController: "source-controller", ReportingInstance: "source-controller-5c6d7e8f9-a1b2c",
		}},
	}

	for _, tc := range events {
		mu.Lock()
		before := len(got)
		mu.Unlock()
		body, err := json.Marshal(tc.e)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.Post(srv.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: event server answered %d", tc.name, res.StatusCode)
		}
		// One delivery per Provider (three), posted from goroutines.
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			n := len(got) - before
			mu.Unlock()
			if n == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of 3 deliveries after 20s", tc.name, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		for i := before; i < len(got); i++ {
			got[i].Name = tc.name
		}
		mu.Unlock()
	}

	mu.Lock()
	defer mu.Unlock()
	// Deliveries race each other (one goroutine per Provider): a stable order for the fixture.
	sort.SliceStable(got, func(i, j int) bool { return got[i].Path < got[j].Path })
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
