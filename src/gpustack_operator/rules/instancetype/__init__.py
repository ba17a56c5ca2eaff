"""The InstanceType spec as the API accepts it: defaulting stamps its labels; create and update checks."""
