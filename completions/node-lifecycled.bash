# bash completion for node-lifecycled(8). The Debian package installs it as
# /usr/share/bash-completion/completions/node-lifecycled; by hand, source it from ~/.bashrc.
# It needs nothing from the bash-completion package. tests/config_and_operator_files/ops_pack.rs checks that it offers
# every command and option of `node-lifecycled --help`.

_node_lifecycled() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    local prev=${COMP_WORDS[COMP_CWORD - 1]}
    local commands="run check-config doctor status explain shadow pause resume"
    local command="" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            run | check-config | doctor | status | explain | shadow | pause | resume)
                command=${COMP_WORDS[i]}
                break
                ;;
        esac
    done

    # The value of an option.
    case $prev in
        --config | -c | --socket | --kubeconfig | --kcm-manifest | --k3s-config | --rke2-config | \
            --k0s-config | --microk8s-args)
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            return
            ;;
        --output)
            mapfile -t COMPREPLY < <(compgen -W "text json" -- "$cur")
            return
            ;;
        --format)
            mapfile -t COMPREPLY < <(compgen -W "text json markdown" -- "$cur")
            return
            ;;
        --since)
            mapfile -t COMPREPLY < <(compgen -W "1h 24h 168h" -- "$cur")
            return
            ;;
        --fence-sample)
            mapfile -t COMPREPLY < <(compgen -W "1 3 5" -- "$cur")
            return
            ;;
        --for)
            mapfile -t COMPREPLY < <(compgen -W "30m 1h 2h 4h 8h" -- "$cur")
            return
            ;;
        --reason)
            return
            ;;
    esac

    local options
    case $command in
        "") options="$commands --config --help --version" ;;
        run | check-config) options="--config --help" ;;
        doctor)
            options="--config --output --kubeconfig --kcm-manifest --k3s-config --rke2-config"
            options="$options --k0s-config --microk8s-args --fence-sample --help"
            ;;
        status) options="--config --socket --help" ;;
        shadow) options="report --since --format --config --socket --help" ;;
        pause) options="fencing tainting all --for --reason --config --help" ;;
        resume) options="fencing tainting all --config --help" ;;
        explain)
            options="--config --socket --help"
            # The node to explain, when kubectl can list them quickly (pods are NAMESPACE/POD).
            if [[ $cur != -* ]] && command -v kubectl >/dev/null 2>&1; then
                local nodes
                nodes=$(kubectl get nodes --request-timeout=2s \
                    -o jsonpath='{.items[*].metadata.name}' 2>/dev/null)
                options="$options $nodes"
            fi
            ;;
    esac
    mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur")
}

complete -F _node_lifecycled node-lifecycled
