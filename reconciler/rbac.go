package reconciler

// The manager's own needs, beside what each reconciler's markers grant:
// leader election holds a Lease in the controller's namespace (the chart
// binds these namespaced rules there, whatever namespace it installs in),
// and controller-runtime's leader election records its events through the
// core events API while the reconcilers' recorders use events.k8s.io.

// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=taugrid-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// The run reconciler makes each TauRun the controller owner of its Job or
// RayJob (blockOwnerDeletion); API servers with the
// OwnerReferencesPermissionEnforcement admission plugin require update on
// the owner's finalizers for that.

// +kubebuilder:rbac:groups=taugrid.dev,resources=tauruns/finalizers,verbs=update
