"""What installing the operator on a cluster consists of, generated from the code that runs there.

The Helm chart's RBAC and the Kueue configuration it hands to the Kueue subchart are not written by hand:
`rbac` sums up the API verbs each part of the worker and the device manager declares, `kueue` renders the
Kueue Configuration from the same rules the sandbox's Kueue runs with (rules.capacity.kueueconfig), and
`chart` lays both out as the chart's files, so `scripts/gen_chart.py --check` fails when code and chart
drift. This package sits above the worker and the device manager because it reads their declarations.
"""
