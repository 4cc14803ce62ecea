// Pins the Secrets Store CSI driver, whose CRDs (SecretProviderClass, SecretProviderClassPodStatus)
// the CSI tests install from this module's config/crd/bases, read from the Go module cache. Nothing is
// built from it: the driver needs a kubelet, which kwok does not have (test/support/csi-driver.ts).
module gitops-reloader/test/cluster/csi

go 1.26.0

require sigs.k8s.io/secrets-store-csi-driver v1.5.4
