package shared

// The manager's own needs, beside what each reconciler's markers grant:
// leader election holds a Lease in the controller's namespace, and
// controller-runtime records its LeaderElection event on that Lease through
// the core events API (the reconcilers' recorders use events.k8s.io). The
// chart binds these namespaced rules in its own namespace, whatever it is.
// TestTheChartsRBACRunsAPlatformARepositoryAndARun fails without any of them.

// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=taugrid-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=taugrid-system,resources=events,verbs=create;patch

// The run reconciler makes each TauRun the controller owner of its Job or
// RayJob (blockOwnerDeletion); API servers with the
// OwnerReferencesPermissionEnforcement admission plugin require update on
// the owner's finalizers for that.

// +kubebuilder:rbac:groups=taugrid.dev,resources=tauruns/finalizers,verbs=update

// The metrics endpoint (controller-runtime's
// filters.WithAuthenticationAndAuthorization) serves only callers the API
// server vouches for (a TokenReview) whose RBAC grants get on /metrics (a
// SubjectAccessReview): the chart's <release>-metrics-reader ClusterRole.

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
